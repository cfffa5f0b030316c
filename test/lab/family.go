package lab

import (
	"fmt"
	"net"
	"strings"
)

// Family is one address family of the dual-stack lab: every node, pod and
// Service has an address of each, and a scenario's fault is written in one
// family's rules (its IPv6 variant is named NAME-v6). The node's rules of
// the other family are kube-proxy's and flannel's healthy ones, as on a
// dual-stack cluster.
type Family struct {
	IPv6 bool
	// The scenario's addresses in this family.
	Node1, Node2, Router string
	ClusterCIDR          string
	Pod1, Pod2           string
	SNATService          string
	PathsService         string
	EchoService          string
	LiveHostPortPod      string
	DeadHostPortPod      string
	LoadBalancer         string
	IngressService       string
	IngressPod           string
	NoisePod             string
	NoiseService         string
	// Bridge1 and VTEP1 are node 1's cni0 and tunnel addresses, which it
	// masquerades pod-bound traffic to.
	Bridge1, VTEP1 string
	// Tunnel is node 1's vxlan device of this family: flannel carries
	// each family in its own device, over an underlay of the same family.
	Tunnel string
	// Multicast is the family's multicast range, which flannel never
	// masquerades.
	Multicast string
	Loopback  string
}

// IPv4 is the lab's IPv4 family.
var IPv4 = Family{
	Node1: Node1IP, Node2: Node2IP, Router: RouterIP, ClusterCIDR: ClusterCIDR,
	Pod1: Pod1IP, Pod2: Pod2IP,
	SNATService: SNATServiceIP, PathsService: PathsServiceIP, EchoService: "10.96.0.30",
	LiveHostPortPod: LiveHostPortPod, DeadHostPortPod: DeadHostPortPod,
	LoadBalancer: LoadBalancerIP, IngressService: "10.96.0.40", IngressPod: IngressPodIP,
	NoisePod: NoisePodIP, NoiseService: NoiseServiceIP,
	Bridge1: "10.244.1.1", VTEP1: "10.244.1.0", Tunnel: "flannel.1",
	Multicast: "224.0.0.0/4", Loopback: "127.0.0.1",
}

// IPv6 is the lab's IPv6 family: the same plan, with the IPv4 address's
// last bytes in the interface identifier where they fit.
var IPv6 = Family{
	IPv6:  true,
	Node1: "fd00:172:20::1", Node2: "fd00:172:20::2", Router: "fd00:172:20::fe", ClusterCIDR: "fd00:10:244::/56",
	Pod1: "fd00:10:244:1::10", Pod2: "fd00:10:244:2::10",
	SNATService: "fd00:10:96::10", PathsService: "fd00:10:96::20", EchoService: "fd00:10:96::30",
	LiveHostPortPod: "fd00:10:244:1::34", DeadHostPortPod: "fd00:10:244:1::36",
	LoadBalancer: "fd00:172:20::100", IngressService: "fd00:10:96::40", IngressPod: "fd00:10:244:1::20",
	NoisePod: "fd00:10:244:1::50", NoiseService: "fd00:10:96::99",
	Bridge1: "fd00:10:244:1::1", VTEP1: "fd00:10:244:1::", Tunnel: "flannel-v6.1",
	Multicast: "ff00::/8", Loopback: "::1",
}

// familyOf is the family a scenario name says: IPv6 for NAME-v6.
func familyOf(v6 bool) Family {
	if v6 {
		return IPv6
	}
	return IPv4
}

// HostPort joins an address and a port ("[fd00::1]:80" for IPv6).
func (f Family) HostPort(ip string, port any) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }

// host is an address as a single-address prefix, as iptables-save prints
// it.
func (f Family) host(ip string) string {
	if f.IPv6 {
		return ip + "/128"
	}
	return ip + "/32"
}

// iptables is the family's iptables command.
func (f Family) iptables() string {
	if f.IPv6 {
		return "ip6tables"
	}
	return "iptables"
}

// restore is the program that loads the family's rules.
func (f Family) restore() string { return f.iptables() + "-restore" }

// Suffix is what the family adds to a scenario's name.
func (f Family) Suffix() string {
	if f.IPv6 {
		return "-v6"
	}
	return ""
}

// nodeAddrs are a node's addresses in one family.
type nodeAddrs struct {
	ip, podCIDR, vtepAddr, vtepMAC, bridgeIP string
}

func (n node) addrs(f Family) nodeAddrs {
	if f.IPv6 {
		return n.v6
	}
	return n.v4
}

// podAddr is the pod's address in the family.
func (p Pod) addr(f Family) string {
	if f.IPv6 {
		return p.IP6
	}
	return p.IP
}

// prefixLen is the pod subnet's prefix length, for the pod's own address.
func prefixLen(cidr string) string {
	_, bits, _ := strings.Cut(cidr, "/")
	return bits
}

// NodePodCIDR is node's (1 or 2) pod subnet in the family.
func NodePodCIDR(f Family, node int) string { return nodes[node-1].addrs(f).podCIDR }
