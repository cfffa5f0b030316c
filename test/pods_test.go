package test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/nettrace-dev/nettrace/internal/output"
)

// cniPluginDir is where Debian's containernetworking-plugins puts the
// reference plugins.
const cniPluginDir = "/usr/lib/cni"

// cniPod is a pod sandbox's network, set up as a container runtime sets it
// up: a namespace /run/netns/cni-UUID, and the reference CNI plugins
// (bridge, host-local) called through libcni with the pod's CNI_ARGS,
// from inside a node's namespace (where the bridge is made) and with
// libcni's cache, IPAM leases and the bridge all in the test's own places.
type cniPod struct {
	node, netns, ip string
	cacheDir        string
}

// setUpCNIPod adds the pod namespace/name's network and deletes it at the
// test's end, as the runtime would when the pod is removed.
func setUpCNIPod(t *testing.T, namespace, name string) cniPod {
	t.Helper()
	for _, plugin := range []string{"bridge", "host-local"} {
		if _, err := os.Stat(filepath.Join(cniPluginDir, plugin)); err != nil {
			t.Fatalf("needs the CNI plugin %s (Debian package containernetworking-plugins: make deps installs it): %v", plugin, err)
		}
	}
	dir := t.TempDir()
	pod := cniPod{node: newNetns(t, "node"), netns: "cni-" + randomUUID(t), cacheDir: filepath.Join(dir, "cache")}
	sh(t, "ip", "netns", "add", pod.netns)
	t.Cleanup(func() { sh(t, "ip", "netns", "del", pod.netns) })
	conf, err := libcni.ConfListFromBytes(fmt.Appendf(nil, `{"cniVersion": "1.0.0", "name": "nettrace-test", "plugins": [
		{"type": "bridge", "bridge": "ntcni0", "isGateway": true,
		 "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.7.0/24"}]], "dataDir": %q}}]}`, filepath.Join(dir, "ipam")))
	if err != nil {
		t.Fatal(err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{cniPluginDir}, pod.cacheDir, nil)
	id := randomUUID(t)
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: filepath.Join("/run/netns", pod.netns), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", id}}}
	inNetns(t, pod.node, func() error {
		_, err := cni.AddNetworkList(context.Background(), conf, rt)
		return err
	})
	t.Cleanup(func() {
		inNetns(t, pod.node, func() error { return cni.DelNetworkList(context.Background(), conf, rt) })
	})
	// "4: eth0    inet 10.88.7.2/24 brd ..."
	f := strings.Fields(sh(t, "ip", "-n", pod.netns, "-4", "-o", "addr", "show", "eth0"))
	if len(f) < 4 {
		t.Fatalf("the pod's eth0 has no IPv4 address: %v", f)
	}
	pod.ip, _, _ = strings.Cut(f[3], "/")
	return pod
}

// randomUUID is a random UUID's text, as runtimes name sandboxes' namespaces.
func randomUUID(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// TestPodNamesFromCNICache: a pod's namespace, set up by the real CNI
// plugins through libcni as a runtime does, is named after the pod
// (pod:NAMESPACE/NAME) in events, flows, findings and the recording, not
// after the runtime's cni-UUID.
func TestPodNamesFromCNICache(t *testing.T) {
	pod := setUpCNIPod(t, "shop", "checkout-7d9f")
	const name = "pod:shop/checkout-7d9f"
	recording := filepath.Join(t.TempDir(), "pod.ntrace")
	w := startWatch(t, "--cni-cache", filepath.Join(pod.cacheDir, "results"), "--netns", pod.node, "--netns", pod.netns,
		"-w", recording, "host "+pod.ip)
	// Nothing listens in the pod: its kernel answers the SYN with a reset.
	if err := dial(t, pod.node, "", pod.ip+":9", 2*time.Second); err == nil {
		t.Fatal("connected to a port nothing listens on")
	}
	w.await(t, "an event in the pod's namespace", 1, func(e output.JSONEvent) bool { return e.Netns == name })
	tr := w.stop(t)
	for _, e := range tr.events {
		if strings.HasPrefix(e.Netns, "cni-") {
			t.Errorf("an event names the pod's namespace %s, not %s: %+v", e.Netns, name, e)
		}
	}
	found := false
	for _, x := range tr.explanations {
		found = found || strings.Contains(x.Summary, name)
	}
	if !found {
		t.Errorf("no finding names %s: %+v", name, tr.explanations)
	}
	requireSameReplay(t, recording, tr)
}
