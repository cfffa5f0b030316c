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
	buildImage(t, image)
	name := fmt.Sprintf("nettrace-test-%d", os.Getpid())
	t.Cleanup(func() { exec.Command("podman", "rm", "--force", "--ignore", name).Run() })
	r := runLab(t, "snat-missing", "host "+lab.SNATServiceIP, runOptions{launcher: podmanRun(name, image)})
	checkSNATMissing(t, r, false)
}

// podmanRun is deploy/podman-run.sh for the lab: the lab's own CNI cache
// in the runtime's place, and the test's temporary files (the recording,
// the ready file) where recordings go.
func podmanRun(name, image string) []string {
	return []string{"env", "IMAGE=" + image, "CNI_CACHE=" + lab.CNIResults, "NETTRACE_DIR=" + os.TempDir(),
		// crun refuses this machine's hybrid cgroup hierarchy; runc runs.
		"PODMAN_GLOBAL=--runtime runc",
		// The machine withholds CAP_SYS_RESOURCE from root: the container's
		// limits can only be set below podman's own.
		"PODMAN_RUN=--name " + name + " --ulimit nofile=4096:4096 --ulimit nproc=4096:4096",
		"../deploy/podman-run.sh"}
}
