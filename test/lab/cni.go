package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nettrace-dev/nettrace/internal/netns"
)

// CNIPluginDir is where Debian's containernetworking-plugins puts the
// reference plugins the lab's pods are set up with.
const CNIPluginDir = "/usr/lib/cni"

// CNICacheDir is the lab's libcni cache, kept apart from the host's
// (/var/lib/cni) so that the lab never touches a real runtime's state;
// nettrace finds the lab's pods in CNIResults (--cni-cache).
var (
	CNICacheDir = filepath.Join(StateDir, "cni")
	CNIResults  = filepath.Join(CNICacheDir, "results")
)

// KubeNamespace is the Kubernetes namespace of every lab pod, the one
// kube-proxy's rules name the lab's Services in.
const KubeNamespace = "default"

// NetnsName is what nettrace names pod's namespace: after the pod, found
// in libcni's cache.
func NetnsName(pod string) string { return "pod:" + KubeNamespace + "/" + pod }

// IsLabNetns says whether nettrace's name for a namespace is one of the
// lab's: a node, the underlay or a pod.
func IsLabNetns(name string) bool {
	return strings.HasPrefix(name, Prefix) || strings.HasPrefix(name, "pod:"+KubeNamespace+"/")
}

// podNetwork is a node's pod network as flannel's CNI plugin delegates it
// (kube-flannel's cni-conf.json: hairpin mode, the node's bridge as every
// pod's default gateway, the node's lease in each family for host-local),
// called through libcni from inside the node's namespace as a container
// runtime calls it. The pods' addresses are fixed (host-local's ips
// capability), so that each scenario's rules can name them. Without
// hairpin, the bridge ports' hairpin mode is off (the plugin's default). A
// non-zero mtu is the pods' MTU, as flannel's plugin passes the tunnel's
// (FLANNEL_MTU); zero leaves the bridge plugin's default, 1500.
type podNetwork struct {
	node node
	cni  *libcni.CNIConfig
	conf *libcni.NetworkConfigList
}

func newPodNetwork(n node, hairpin bool, mtu int) (*podNetwork, error) {
	ipam := filepath.Join(CNICacheDir, "ipam-"+n.ns)
	conf, err := libcni.ConfListFromBytes(fmt.Appendf(nil, `{"cniVersion": "1.0.0", "name": "cbr0", "plugins": [
		{"type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true, "hairpinMode": %t, "mtu": %d,
		 "ipMasq": false, "capabilities": {"ips": true},
		 "ipam": {"type": "host-local", "dataDir": %q,
		          "ranges": [[{"subnet": %q}], [{"subnet": %q}]]}}]}`, hairpin, mtu, ipam, n.v4.podCIDR, n.v6.podCIDR))
	if err != nil {
		return nil, fmt.Errorf("pod network of %s: %w", n.ns, err)
	}
	for _, plugin := range []string{"bridge", "host-local"} {
		if _, err := os.Stat(filepath.Join(CNIPluginDir, plugin)); err != nil {
			return nil, fmt.Errorf("needs the CNI plugin %s (Debian package containernetworking-plugins; make deps installs it): %w", plugin, err)
		}
	}
	return &podNetwork{node: n, cni: libcni.NewCNIConfigWithCacheDir([]string{CNIPluginDir}, CNICacheDir, nil), conf: conf}, nil
}

// add sets up pod's network in its namespace (made already) as the
// runtime does for a new sandbox, and returns the veth's end on the node.
func (pn *podNetwork) add(p Pod) (string, error) {
	var res *types100.Result
	err := netns.Do(filepath.Join(netns.RunDir, pn.node.ns), func() error {
		r, err := pn.cni.AddNetworkList(context.Background(), pn.conf, pn.runtimeConf(p))
		if err != nil {
			return err
		}
		res, err = types100.NewResultFromResult(r)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("CNI ADD of pod %s on %s: %w", p.Name, pn.node.ns, err)
	}
	for _, i := range res.Interfaces {
		if i.Sandbox == "" && i.Name != "cni0" {
			return i.Name, nil
		}
	}
	return "", fmt.Errorf("CNI ADD of pod %s: the bridge plugin's result has no veth on the node: %v", p.Name, res)
}

// runtimeConf is what the runtime tells the plugins of pod p's sandbox.
func (pn *podNetwork) runtimeConf(p Pod) *libcni.RuntimeConf {
	id := sha256.Sum256([]byte("nettrace-lab/" + p.Name))
	containerID := hex.EncodeToString(id[:])
	return &libcni.RuntimeConf{
		ContainerID: containerID, NetNS: filepath.Join(netns.RunDir, p.Namespace()), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", KubeNamespace}, {"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID}},
		CapabilityArgs: map[string]any{"ips": []string{
			p.IP + "/" + prefixLen(pn.node.v4.podCIDR), p.IP6 + "/" + prefixLen(pn.node.v6.podCIDR)}},
	}
}

// deletePod tears pod p's network down as the runtime does when the pod
// goes: CNI DEL, which deletes its veth and releases its addresses.
func deletePod(p Pod) error {
	pn, err := newPodNetwork(nodes[p.Node-1], true, 0)
	if err != nil {
		return err
	}
	err = netns.Do(filepath.Join(netns.RunDir, pn.node.ns), func() error {
		return pn.cni.DelNetworkList(context.Background(), pn.conf, pn.runtimeConf(p))
	})
	if err != nil {
		return fmt.Errorf("CNI DEL of pod %s on %s: %w", p.Name, pn.node.ns, err)
	}
	return nil
}
