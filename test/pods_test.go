package test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// cniNetwork is a node's pod network as a container runtime drives it: the
// reference CNI plugins (bridge with host-local IPAM, and portmap for
// hostPorts) called through libcni, from inside a node namespace (where the
// bridge and portmap's rules are made), with libcni's cache and the IPAM
// leases in the test's own directory. Each pod's namespace is
// /run/netns/cni-UUID, as runtimes make them.
type cniNetwork struct {
	node     string
	cacheDir string
	cni      *libcni.CNIConfig
	conf     *libcni.NetworkConfigList
}

// cniPod is a pod sandbox whose network was set up.
type cniPod struct {
	netns, ip string
	rt        *libcni.RuntimeConf
}

// hostPort is a pod's hostPort mapping, as the kubelet passes it to CNI.
type hostPort struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
}

func newCNINetwork(t *testing.T) *cniNetwork {
	t.Helper()
	// The node's namespace is made first so that it goes last: with it go
	// the bridge and portmap's rules, whatever a test left.
	node := newNetns(t, "node")
	return cniNetworkOn(t, node, func(ipamDir string) string {
		return fmt.Sprintf(`{"type": "bridge", "bridge": "ntcni0", "isGateway": true,
			"ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.7.0/24"}]], "dataDir": %q}}`, ipamDir)
	})
}

// cniNetworkOn is the pod network of node whose first plugin is the bridge
// plugin configured by bridge (given the directory for host-local's
// leases), followed by portmap.
func cniNetworkOn(t *testing.T, node string, bridge func(ipamDir string) string) *cniNetwork {
	t.Helper()
	for _, plugin := range []string{"bridge", "host-local", "portmap"} {
		if _, err := os.Stat(filepath.Join(lab.CNIPluginDir, plugin)); err != nil {
			t.Fatalf("needs the CNI plugin %s (Debian package containernetworking-plugins: make deps installs it): %v", plugin, err)
		}
	}
	dir := t.TempDir()
	conf, err := libcni.ConfListFromBytes(fmt.Appendf(nil, `{"cniVersion": "1.0.0", "name": "nettrace-test", "plugins": [
		%s, {"type": "portmap", "capabilities": {"portMappings": true}}]}`, bridge(filepath.Join(dir, "ipam"))))
	if err != nil {
		t.Fatal(err)
	}
	n := &cniNetwork{node: node, cacheDir: filepath.Join(dir, "cache"), conf: conf}
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{lab.CNIPluginDir}, n.cacheDir, nil)
	return n
}

// add sets up the network of pod namespace/name, with its hostPorts, and
// removes it at the test's end as the runtime does when the pod goes.
func (n *cniNetwork) add(t *testing.T, namespace, name string, ports ...hostPort) *cniPod {
	t.Helper()
	pod := &cniPod{netns: "cni-" + randomUUID(t)}
	sh(t, "ip", "netns", "add", pod.netns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", pod.netns).Run() })
	id := randomUUID(t)
	pod.rt = &libcni.RuntimeConf{ContainerID: id, NetNS: filepath.Join(netns.RunDir, pod.netns), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", id}}}
	if len(ports) > 0 {
		pod.rt.CapabilityArgs = map[string]any{"portMappings": ports}
	}
	inNetns(t, n.node, func() error {
		_, err := n.cni.AddNetworkList(context.Background(), n.conf, pod.rt)
		return err
	})
	t.Cleanup(func() { n.remove(t, pod) })
	// "4: eth0    inet 10.88.7.2/24 brd ..."
	f := strings.Fields(sh(t, "ip", "-n", pod.netns, "-4", "-o", "addr", "show", "eth0"))
	if len(f) < 4 {
		t.Fatalf("the pod's eth0 has no IPv4 address: %v", f)
	}
	pod.ip, _, _ = strings.Cut(f[3], "/")
	return pod
}

// remove deletes a pod's network (CNI DEL) and its namespace; again, it
// does nothing.
func (n *cniNetwork) remove(t *testing.T, pod *cniPod) {
	if pod.rt == nil {
		return
	}
	inNetns(t, n.node, func() error { return n.cni.DelNetworkList(context.Background(), n.conf, pod.rt) })
	pod.rt = nil
	exec.Command("ip", "netns", "del", pod.netns).Run()
}

// stop is a runtime stopped in the middle of a pod's removal: the pod's
// namespace (and its end of the veth) is gone, its network never deleted.
func (pod *cniPod) stop(t *testing.T) {
	sh(t, "ip", "netns", "del", pod.netns)
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
	n := newCNINetwork(t)
	pod := n.add(t, "shop", "checkout-7d9f")
	const name = "pod:shop/checkout-7d9f"
	recording := filepath.Join(t.TempDir(), "pod.ntrace")
	w := startWatch(t, "--cni-cache", filepath.Join(n.cacheDir, "results"), "--netns", n.node, "--netns", pod.netns,
		"-w", recording, "host "+pod.ip)
	// Nothing listens in the pod: its kernel answers the SYN with a reset.
	if err := dial(t, n.node, "", pod.ip+":9", 2*time.Second); err == nil {
		t.Fatal("connected to a port nothing listens on")
	}
	tr := requirePodNamed(t, w, name)
	found := false
	for _, x := range tr.explanations {
		found = found || strings.Contains(x.Summary, name)
	}
	if !found {
		t.Errorf("no finding names %s: %+v", name, tr.explanations)
	}
	requireSameReplay(t, recording, tr)
}

// TestStaleHostPortWithCNIPlugins is incident 4 with the CNI plugins
// themselves: a runtime stopped while it removed a pod leaves that pod's
// hostPort chain (portmap's CNI-DN-...) ahead of the chain of the pod that
// took the port next, so a connection to the node's port is DNATed to the
// dead pod's address, whose neighbour never answers. nettrace names the
// stale chain's DNAT and the live pod's DNAT behind it. The twin removes
// the first pod cleanly: the connection reaches the new pod, no finding.
func TestStaleHostPortWithCNIPlugins(t *testing.T) {
	for _, stale := range []bool{true, false} {
		t.Run(map[bool]string{true: "stale", false: "healthy"}[stale], func(t *testing.T) {
			n := newCNINetwork(t)
			port := hostPort{HostPort: 8443, ContainerPort: 443, Protocol: "tcp"}
			old := n.add(t, "shop", "ingress-old", port)
			deadIP := old.ip
			if stale {
				old.stop(t)
			} else {
				n.remove(t, old)
			}
			live := n.add(t, "shop", "ingress-new", port)
			listen(t, live.netns, live.ip+":443", 0, true)
			// The node's address on the bridge: a local address, which
			// portmap's CNI-HOSTPORT-DNAT translates in OUTPUT.
			node := "10.88.7.1:8443"
			w := startWatch(t, "--cni-cache", filepath.Join(n.cacheDir, "results"), "--netns", n.node, "--netns", live.netns,
				"tcp port 8443 or tcp port 443")
			// A process's connect sends its SYN once while the first waits
			// for the neighbour: the drop that explains it comes 3 s later.
			err := dial(t, n.node, "", node, 6*time.Second)
			tr := w.stop(t)
			x, ok := twinFinding(t, tr, err, stale, "dnat-to-dead-endpoint")
			if !ok {
				return
			}
			if !strings.Contains(x.Summary, "SYN to "+node+" was DNATed to "+deadIP+":443") {
				t.Fatalf("the finding names another DNAT than to %s: %s", deadIP, x.Summary)
			}
			r := labRun{family: lab.IPv4}
			r.namedRule(t, x, n.node, "decided", "-j DNAT --to-destination "+deadIP+":443")
			r.namedRule(t, x, n.node, "other", "-j DNAT --to-destination "+live.ip+":443")
			// The dead pod is named by the address its stale chain still
			// DNATs to: its cache entry outlived its namespace.
			if want := []output.JSONPod{{Address: deadIP, Pod: "shop/ingress-old"}}; !slices.Equal(x.Pods, want) {
				t.Errorf("pods named %+v, want %+v", x.Pods, want)
			}
			t.Log(x.Summary)
		})
	}
}
