package test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/nettrace-dev/nettrace/test/lab"
)

// TestPodman: nettrace's image (scripts/image.sh), run under podman with
// the privileges and mounts deploy/ documents and nothing more, watches
// the lab and names incident 1, as the binary run on the host does.
func TestPodman(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatalf("needs podman (Debian package podman: make deps installs it): %v", err)
	}
	image := fmt.Sprintf("localhost/nettrace:test-%d", os.Getpid())
	sh(t, "../scripts/image.sh", image)
	t.Cleanup(func() { exec.Command("podman", "rmi", "--force", image).Run() })
	name := fmt.Sprintf("nettrace-test-%d", os.Getpid())
	t.Cleanup(func() { exec.Command("podman", "rm", "--force", "--ignore", name).Run() })
	r := runLab(t, "snat-missing", "host "+lab.SNATServiceIP, runOptions{launcher: podmanRun(name, image)})
	checkSNATMissing(t, r, false)
}

// podmanRun is the command that runs nettrace's image as deploy/README.md
// says, for the lab: the lab's own CNI cache in the runtime's place, and
// the test's temporary files (the recording, the ready file) at their
// paths.
func podmanRun(name, image string) []string {
	return []string{"podman",
		// crun refuses this machine's hybrid cgroup hierarchy; runc runs.
		"--runtime", "runc",
		"run", "--rm", "--name", name,
		// The machine withholds CAP_SYS_RESOURCE from root: the container's
		// limits can only be set below podman's own.
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		"--network", "host", "--pid", "host",
		"--cap-drop", "all", "--cap-add", "SYS_ADMIN,NET_ADMIN,SYS_PTRACE,SYSLOG",
		"--volume", "/run/netns:/run/netns:ro,rslave",
		"--volume", "/sys/kernel/security:/sys/kernel/security:ro",
		"--volume", lab.CNIResults + ":" + lab.CNIResults + ":ro",
		"--volume", os.TempDir() + ":" + os.TempDir(),
		image}
}
