// Package cluster runs a real Kubernetes cluster on this machine, in
// network namespaces, for the tests and for users (`ntlab cluster up`):
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler in a
// control-plane namespace, and two nodes, each a network namespace with
// its own containerd, kubelet, flanneld (--kube-subnet-mgr, as kube-flannel
// runs it) and kube-proxy. Nothing is imitated: Services, EndpointSlices,
// pod CIDRs and DaemonSet pods are made by the controllers, the pods' network
// by flannel's CNI plugin, the Services' rules by kube-proxy.
//
// The components hard-code paths (/run/containerd, /var/lib/kubelet,
// /var/lib/cni, /run/flannel, /var/log/pods): each node's run in a mount
// namespace of the node's own, with tmpfs over /run, /var/lib and /var/log,
// so that two nodes do not meet there and nothing of them stays on the host
// once their processes are gone. The state that must outlive a process (the
// PKI, the configurations, the logs, the pid files) is in StateDir, which
// Down removes with the rest.
package cluster

import (
	"fmt"
	"path/filepath"
	"time"
)

const (
	// Prefix names the cluster's network namespaces and the host's veth.
	Prefix = "ntkube-"
	// StateDir holds the PKI, configurations, logs and pid files. Not
	// under /run or /var/lib, which the nodes' mount namespaces hide.
	StateDir = "/var/tmp/nettrace-cluster"
	// ControlPlane is the control plane's namespace.
	ControlPlane = Prefix + "cp"
	// Underlay is the namespace of the nodes' network: a bridge that links
	// the control plane and the nodes, whose own address (RouterIP) stands
	// for the world outside the cluster.
	Underlay = Prefix + "ul"
	// APIServerIP is the API server's address on the nodes' network, the
	// one it advertises (the kubernetes Service's endpoint).
	APIServerIP = "172.21.0.10"
	// RouterIP is the underlay's own address: the nodes' default route,
	// and a client outside the cluster.
	RouterIP = "172.21.0.254"
	// HostAPIServerIP is where the host (and so the kubeconfig `up`
	// prints) reaches the API server: the control plane's end of a veth
	// of the host's own (hostAPILink), which routes nothing else.
	HostAPIServerIP = "10.99.0.1"
	hostAPILink     = Prefix + "api"
	hostLinkIP      = "10.99.0.2"
	// ClusterCIDR is the pods' network, one /24 a node (the controller
	// manager's node IPAM, which flanneld's subnet manager reads).
	ClusterCIDR = "10.244.0.0/16"
	// ServiceCIDR is the Services' cluster IPs; KubernetesServiceIP the
	// API server's.
	ServiceCIDR         = "10.96.0.0/16"
	KubernetesServiceIP = "10.96.0.1"
	// Nodes is how many nodes the cluster has.
	Nodes = 2
	// Patience bounds each wait for a component (machines can be slow).
	Patience = 5 * time.Minute
	// marker is set in the environment of every process the cluster starts
	// (and inherited by what they start), so that Down finds them all.
	marker = "NETTRACE_CLUSTER=1"
)

// Node is one node's names and address.
type Node struct {
	Name  string // as the API has it: node-1, node-2
	Netns string // its network namespace: ntkube-node-1, ...
	IP    string // its address on the underlay
}

// NodeAt returns node i (1-based).
func NodeAt(i int) Node {
	return Node{Name: fmt.Sprintf("node-%d", i), Netns: fmt.Sprintf("%snode-%d", Prefix, i), IP: fmt.Sprintf("172.21.0.%d", i)}
}

// AllNodes lists the cluster's nodes.
func AllNodes() []Node {
	out := make([]Node, Nodes)
	for i := range out {
		out[i] = NodeAt(i + 1)
	}
	return out
}

// dir is the node's directory in StateDir.
func (n Node) dir() string { return filepath.Join(StateDir, n.Name) }

// Options are the ways a cluster may differ, as real clusters do.
type Options struct {
	// ProxyMode is kube-proxy's mode (iptables when empty).
	ProxyMode ProxyMode
	// NoProxyClusterCIDR runs kube-proxy without the cluster's pod CIDR,
	// as clusters set up before it was required do (the seed incident
	// 000's): kube-proxy then marks no traffic from outside the pod
	// network for masquerading, and a node calling a cluster IP relies
	// on flannel's masquerade.
	NoProxyClusterCIDR bool
}

// ProxyMode is kube-proxy's mode.
type ProxyMode string

const (
	IPTables ProxyMode = "iptables"
	NFTables ProxyMode = "nftables"
)

// Binaries are the programs the cluster runs that are not Debian's.
type Binaries struct {
	Kube       string // the directory of kube-apiserver, kubelet, ... (scripts/kube.sh)
	Flanneld   string // flanneld (scripts/flanneld.sh)
	FlannelCNI string // flannel's CNI plugin (scripts/flannel-cni.sh)
	Lab        string // ntlab, static: the pods' image runs it
}

func (b Binaries) kube(name string) string { return filepath.Join(b.Kube, name) }

// Kubeconfig is the path of the administrator's kubeconfig Up writes,
// for the host (server https://HostAPIServerIP:6443).
var Kubeconfig = filepath.Join(StateDir, "admin.kubeconfig")

// Images the cluster's nodes hold, imported (nothing can be pulled).
const (
	// PauseImage is the sandbox image: busybox, sleeping.
	PauseImage = "nettrace.test/pause:1"
	// LabImage runs ntlab (`ntlab serve ...`) and holds busybox.
	LabImage = "nettrace.test/ntlab:1"
)
