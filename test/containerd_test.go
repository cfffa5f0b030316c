package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/test/cluster"
	"github.com/nettrace-dev/nettrace/test/image"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// sandboxImage is the pod sandbox image the test builds (nothing can be
// pulled here): busybox, sleeping, in the pause container's place.
const sandboxImage = "nettrace.test/pause:1"

// containerd is Debian's containerd, run in a node namespace with its CRI
// plugin, as the kubelet's runtime: pod sandboxes' networks are set up by
// the CNI plugins (bridge, host-local, portmap) in that namespace, each
// pod's namespace is /run/netns/cni-UUID, and its libcni keeps its results
// where a node's runtime does (/var/lib/cni/results), until the sandbox
// is removed.
type containerd struct {
	node string
	cri  runtime.RuntimeServiceClient
}

func newContainerd(t *testing.T) *containerd {
	t.Helper()
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("needs %s (Debian packages containerd and runc: make deps installs them): %v", tool, err)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "portmap"} {
		if _, err := os.Stat(filepath.Join(lab.CNIPluginDir, plugin)); err != nil {
			t.Fatalf("needs the CNI plugin %s (Debian package containernetworking-plugins): %v", plugin, err)
		}
	}
	// containerd and runc keep shim sockets and fifos under /run/containerd,
	// and libcni its cache under /var/lib/cni, whatever the configuration
	// says: gone at the end when the test made them (after containerd
	// stopped: cleanups run last first).
	for _, d := range []string{"/run/containerd", "/var/lib/cni"} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	node := newNetns(t, "cri-node")
	dir := t.TempDir()
	config, sock := containerdConfig(t, dir)
	startContainerd(t, node, config, dir)
	c := &containerd{node: node}
	archive := filepath.Join(dir, "pause.tar")
	writeSandboxImage(t, archive)
	for deadline := time.Now().Add(lab.Patience); ; time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("ctr", "--address", sock, "--namespace", "k8s.io", "images", "import", archive).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctr images import: %v\n%s", err, out)
		}
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c.cri = runtime.NewRuntimeServiceClient(conn)
	return c
}

// containerdConfig writes a containerd configuration of its own in dir
// (root, state, socket, runc's root, the CNI network), and returns its
// path and the socket's.
func containerdConfig(t *testing.T, dir string) (config, sock string) {
	t.Helper()
	netd := filepath.Join(dir, "net.d")
	write(t, filepath.Join(netd, "10-nettrace.conflist"), fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "nettrace-cri", "plugins": [
		{"type": "bridge", "bridge": "ntcri0", "isGateway": true,
		 "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.9.0/24"}]], "dataDir": %q}},
		{"type": "portmap", "capabilities": {"portMappings": true}}]}`, filepath.Join(dir, "ipam")))
	sock = filepath.Join(dir, "containerd.sock")
	config = filepath.Join(dir, "config.toml")
	write(t, config, cluster.ContainerdConfig{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), Socket: sock,
		Opt: filepath.Join(dir, "opt"), SandboxImage: sandboxImage, CNIBinDir: lab.CNIPluginDir, CNIConfDir: netd,
		RuncRoot: filepath.Join(dir, "runc")}.TOML())
	return config, sock
}

// startContainerd runs containerd with config in node's namespace until
// the test ends, its log in dir (shown when the test failed).
func startContainerd(t *testing.T, node, config, dir string) {
	t.Helper()
	logPath := filepath.Join(dir, "containerd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// nsenter, not ip netns exec: that mounts a sysfs of the namespace's
	// own over /sys, which hides the cgroup mounts runc needs.
	cmd := exec.Command("nsenter", "--net="+filepath.Join(netns.RunDir, node), "containerd", "--config", config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(lab.Patience):
			cmd.Process.Kill()
			<-done
		}
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Logf("containerd's log (its end):\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
}

// write writes a file, its directory made.
func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSandboxImage writes an OCI image archive whose one file is
// Debian's static busybox, and whose entrypoint sleeps: what a pause
// container does, for `ctr images import`.
func writeSandboxImage(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatalf("needs /bin/busybox (Debian package busybox-static): %v", err)
	}
	if err := image.Write(path, image.Image{Name: sandboxImage, Files: map[string]string{"bin/busybox": "/bin/busybox"},
		Entrypoint: []string{"/bin/busybox", "sleep", "2147483647"}}); err != nil {
		t.Fatal(err)
	}
}

// runPod runs a pod sandbox, as the kubelet does for pod namespace/name,
// removed at the test's end; it returns the pod's address.
func (c *containerd) runPod(t *testing.T, namespace, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lab.Patience)
	defer cancel()
	run, err := c.cri.RunPodSandbox(ctx, &runtime.RunPodSandboxRequest{Config: &runtime.PodSandboxConfig{
		Metadata: &runtime.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: randomUUID(t)},
		Hostname: name,
		Linux:    &runtime.LinuxPodSandboxConfig{},
	}})
	if err != nil {
		t.Fatalf("RunPodSandbox %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), lab.Patience)
		defer cancel()
		if _, err := c.cri.StopPodSandbox(ctx, &runtime.StopPodSandboxRequest{PodSandboxId: run.PodSandboxId}); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if _, err := c.cri.RemovePodSandbox(ctx, &runtime.RemovePodSandboxRequest{PodSandboxId: run.PodSandboxId}); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	st, err := c.cri.PodSandboxStatus(ctx, &runtime.PodSandboxStatusRequest{PodSandboxId: run.PodSandboxId})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	ip := st.GetStatus().GetNetwork().GetIp()
	if ip == "" {
		t.Fatalf("the pod sandbox has no address: %+v", st.GetStatus())
	}
	return ip
}

// TestPodNamesWithContainerd: a pod sandbox run by containerd's CRI
// plugin, as the kubelet runs one, is named after its pod
// (pod:NAMESPACE/NAME) from the CNI results containerd's libcni keeps,
// with no runtime socket asked: in events, and in the finding, which
// names the pod by its namespace and by its address.
func TestPodNamesWithContainerd(t *testing.T) {
	c := newContainerd(t)
	ip := c.runPod(t, "shop", "cart-5f7b")
	const name = "pod:shop/cart-5f7b"
	recording := filepath.Join(t.TempDir(), "containerd.ntrace")
	// The default cache, where containerd's libcni writes.
	w := startWatch(t, "--cni-cache", netns.CNICacheDir, "-w", recording, "--netns", "all", "host "+ip)
	// Nothing listens in the sandbox: its kernel answers with a reset.
	if err := dial(t, c.node, "", ip+":9", 2*time.Second); err == nil {
		t.Fatal("connected to a port nothing listens on")
	}
	tr := requirePodNamed(t, w, name)
	if len(tr.explanations) != 1 || !strings.Contains(tr.explanations[0].Summary, "reached "+name) {
		t.Fatalf("findings %+v, want one naming %s", tr.explanations, name)
	}
	requireSameReplay(t, recording, tr)
	t.Log(tr.explanations[0].Summary)
}
