package lab

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Addresses the scenarios use.
const (
	SNATServiceIP    = "10.96.0.10" // snat-missing: ClusterIP whose pod is on node 2
	NodePort         = 30285
	PathsServiceIP   = "10.96.0.20" // service-paths: endpoints on both nodes
	HostPortNum      = 8443
	LiveHostPortPod  = "10.244.1.34"
	DeadHostPortPod  = "10.244.1.36"
	LoadBalancerIP   = "172.20.0.100"
	IngressPodIP     = "10.244.1.20"
	Pod1IP           = "10.244.1.10"
	Pod2IP           = "10.244.2.10"
	PodPort          = 8080
	SYNOverflowQueue = 1
)

// Client is traffic a scenario drives: Count connections from Namespace
// (optionally from address Src) to Target, all at once when Concurrent.
type Client struct {
	Namespace  string
	Src        string
	Target     string
	Count      int
	Concurrent bool
	Timeout    time.Duration
}

// Scenario is one incident (or its healthy twin) ready to build.
type Scenario struct {
	Name        string
	Healthy     bool
	Description string
	Pods        []Pod
	Servers     []Server
	Rules       map[string]string // namespace -> iptables-restore input
	Nft         map[string]string // namespace -> nft -f input (kube-proxy's nftables mode)
	Sysctls     [][3]string       // namespace, key, value
	Extra       [][]string        // further commands
	Clients     []Client
}

func (s *Scenario) pod(name string) Pod {
	for _, p := range s.Pods {
		if p.Name == name {
			return p
		}
	}
	panic("lab: scenario " + s.Name + " has no pod " + name)
}

// basePods are in every scenario: the two pods incidents involve and q1,
// which only makes background traffic (Noise).
var basePods = []Pod{{"p1", 1, Pod1IP}, {"p2", 2, Pod2IP}, noisePod}

// node2Rules is node 2's nat table: kube-proxy and flannel, no services
// of interest.
func node2Rules() string {
	var t natTable
	kubeProxyBase(&t)
	flannel(&t, nodes[1].podCIDR, "")
	kubeProxyNodePorts(&t)
	return t.String()
}

type builder func(healthy bool) *Scenario

var builders = map[string]builder{
	"snat-missing":   snatMissing,
	"syn-overflow":   synOverflow,
	"service-paths":  servicePaths,
	"stale-hostport": staleHostPort,
	"hairpin":        hairpin,
	// kube-proxy's nftables mode: native nftables rules.
	"service-paths-nft": servicePathsNft,
	"hairpin-nft":       hairpinNft,
}

// singleTwin scenarios have no faulty version.
var singleTwin = map[string]bool{"service-paths": true, "service-paths-nft": true}

// Names lists every scenario and twin.
func Names() []string {
	var out []string
	for n := range builders {
		if !singleTwin[n] {
			out = append(out, n)
		}
		out = append(out, n+"-healthy")
	}
	sort.Strings(out)
	return out
}

// Lookup returns the named scenario ("NAME" or "NAME-healthy").
func Lookup(name string) (*Scenario, error) {
	base, healthy := strings.CutSuffix(name, "-healthy")
	b, ok := builders[base]
	if !ok || (singleTwin[base] && !healthy && name != base) {
		return nil, fmt.Errorf("unknown scenario %q; scenarios: %s", name, strings.Join(Names(), ", "))
	}
	if singleTwin[base] {
		healthy = true
	}
	sc := b(healthy)
	sc.Name, sc.Healthy = name, healthy
	if healthy && !singleTwin[base] {
		sc.Description = "healthy twin (without the fault) of: " + sc.Description
	}
	return sc, nil
}

// 1. A process on node 1 calls a ClusterIP whose pod is on node 2. A stale
// flannel RETURN before the MASQUERADE leaves it un-SNATed in the tunnel;
// the pod answers the node's eth0 address over the underlay, where strict
// rp_filter drops the reply (it should come from the tunnel).
func snatMissing(healthy bool) *Scenario {
	var t natTable
	kubeProxyBase(&t)
	stale := nodes[1].podCIDR
	if healthy {
		stale = ""
	}
	flannel(&t, nodes[0].podCIDR, stale)
	service{name: "web", clusterIP: SNATServiceIP, port: "80", endpoints: []endpoint{{Pod2IP, "8080"}}}.write(&t)
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: "node 1 calls ClusterIP " + SNATServiceIP + ":80 (pod on node 2); stale flannel RETURN skips the MASQUERADE; rp_filter=1",
		Pods:        basePods,
		Servers:     []Server{{Pod: "p2", Port: PodPort, Accept: true}},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: node2Rules()},
		Sysctls: [][3]string{
			{NsNode1, "net.ipv4.conf.all.rp_filter", "1"},
			{NsNode1, "net.ipv4.conf.eth0.rp_filter", "1"},
		},
		Clients: []Client{{Namespace: NsNode1, Target: fmt.Sprintf("%s:80", SNATServiceIP), Count: 1, Timeout: 3 * time.Second}},
	}
}

// 2. External clients call a NodePort on node 1 whose pod listens with a
// tiny backlog and never accepts: the accept queue fills and further SYNs
// are dropped by the listener.
func synOverflow(healthy bool) *Scenario {
	var t natTable
	kubeProxyBase(&t)
	flannel(&t, nodes[0].podCIDR, "")
	svc := service{name: "echo", clusterIP: "10.96.0.30", port: "80", endpoints: []endpoint{{Pod1IP, "8080"}}}
	svc.write(&t)
	ext := chainHash("KUBE-EXT-", "echo")
	t.chain(ext)
	t.add(`-A KUBE-NODEPORTS -p tcp -m comment --comment "default/echo" -m tcp --dport %d -j %s`, NodePort, ext)
	t.add(`-A %s -m comment --comment "masquerade traffic for default/echo external destinations" -j KUBE-MARK-MASQ`, ext)
	t.add(`-A %s -j %s`, ext, svc.svcChain())
	kubeProxyNodePorts(&t)
	server := Server{Pod: "p1", Port: PodPort, Backlog: SYNOverflowQueue, Accept: false}
	if healthy {
		server = Server{Pod: "p1", Port: PodPort, Accept: true}
	}
	return &Scenario{
		Description: fmt.Sprintf("8 clients call NodePort %s:%d; the pod listens with backlog %d and does not accept", Node1IP, NodePort, SYNOverflowQueue),
		Pods:        basePods,
		Servers:     []Server{server},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: node2Rules()},
		Clients: []Client{{Namespace: NsUnderlay, Target: fmt.Sprintf("%s:%d", Node1IP, NodePort), Count: 8,
			Concurrent: true, Timeout: 3 * time.Second}},
	}
}

// 3. Node 1 calls a ClusterIP with one endpoint on each node (the walk of
// seed 002: KUBE-SERVICES, KUBE-MARK-MASQ, KUBE-SVC random choice,
// KUBE-SEP DNAT, KUBE-POSTROUTING MASQUERADE).
func servicePaths(bool) *Scenario {
	var t natTable
	kubeProxyBase(&t)
	flannel(&t, nodes[0].podCIDR, "")
	service{name: "paths", clusterIP: PathsServiceIP, port: "80", masqOffCluster: true,
		endpoints: []endpoint{{Pod1IP, "8080"}, {Pod2IP, "8080"}}}.write(&t)
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: "node 1 calls ClusterIP " + PathsServiceIP + ":80 with endpoints on node 1 and node 2",
		Pods:        basePods,
		Servers:     []Server{{Pod: "p1", Port: PodPort, Accept: true}, {Pod: "p2", Port: PodPort, Accept: true}},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: node2Rules()},
		Clients:     []Client{{Namespace: NsNode1, Target: PathsServiceIP + ":80", Count: 16, Timeout: 3 * time.Second}},
	}
}

// 4. A hostPort on node 1 has two CNI-DN chains: the first, left behind by
// a container whose cleanup never ran, DNATs to a pod address that no
// longer exists.
func staleHostPort(healthy bool) *Scenario {
	var t natTable
	kubeProxyBase(&t)
	portmapBase(&t)
	flannel(&t, nodes[0].podCIDR, "")
	if !healthy {
		hostPort(&t, "fb7cdb0a4f8da673da0a9818ec9a1576f953a8e8decf87a081827c11e4aa7138", fmt.Sprint(HostPortNum), DeadHostPortPod, "443")
	}
	hostPort(&t, "2e5c1a4f0b9d7c3e8a6f4d2b1c0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e", fmt.Sprint(HostPortNum), LiveHostPortPod, "443")
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: fmt.Sprintf("an external client calls hostPort %s:%d; a stale CNI-DN chain DNATs to %s, which no longer exists", Node1IP, HostPortNum, DeadHostPortPod),
		Pods:        append(append([]Pod{}, basePods...), Pod{"web", 1, LiveHostPortPod}),
		Servers:     []Server{{Pod: "web", Port: 443, Accept: true}},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: node2Rules()},
		// Neighbour resolution gives up after 3 probes 100 ms apart, so
		// the dead address fails within the client's timeout.
		Sysctls: [][3]string{{NsNode1, "net.ipv4.neigh.cni0.retrans_time_ms", "100"}},
		Clients: []Client{{Namespace: NsUnderlay, Target: fmt.Sprintf("%s:%d", Node1IP, HostPortNum), Count: 1, Timeout: 3 * time.Second}},
	}
}

// 5. Pod p1 calls the load-balancer address of a Service whose only
// endpoint, an ingress pod, is on the same node. With
// externalTrafficPolicy: Local this kube-proxy skips KUBE-MARK-MASQ, so
// the request is not SNATed and the ingress pod answers p1 directly over
// the bridge, from its own address. Bridged traffic does not cross the
// node's iptables here (bridge-nf-call-iptables=0, as on CNIs that route
// pods without a netfilter-enabled bridge), in both twins.
func hairpin(healthy bool) *Scenario {
	var t natTable
	kubeProxyBase(&t)
	flannel(&t, nodes[0].podCIDR, "")
	svc := service{name: "ingress", clusterIP: "10.96.0.40", port: "443", endpoints: []endpoint{{IngressPodIP, "443"}}}
	svc.write(&t)
	ext := chainHash("KUBE-EXT-", "ingress")
	t.chain(ext)
	t.add(`-A KUBE-SERVICES -d %s/32 -p tcp -m comment --comment "default/ingress loadbalancer IP" -m tcp --dport 443 -j %s`, LoadBalancerIP, ext)
	if healthy {
		t.add(`-A %s -m comment --comment "masquerade traffic for default/ingress external destinations" -j KUBE-MARK-MASQ`, ext)
		t.add(`-A %s -j %s`, ext, svc.svcChain())
	} else {
		svl := chainHash("KUBE-SVL-", "ingress")
		t.chain(svl)
		t.add(`-A %s -j %s`, ext, svl)
		t.add(`-A %s -m comment --comment "default/ingress -> %s:443" -j %s`, svl, IngressPodIP, chainHash("KUBE-SEP-", "ingress"+IngressPodIP))
	}
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: "pod p1 calls load balancer " + LoadBalancerIP + ":443; its only endpoint, ingress pod " + IngressPodIP + ", is on the same node",
		Pods:        append(append([]Pod{}, basePods...), Pod{"ingress", 1, IngressPodIP}),
		Servers:     []Server{{Pod: "ingress", Port: 443, Accept: true}},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: node2Rules()},
		Sysctls:     [][3]string{{NsNode1, "net.bridge.bridge-nf-call-iptables", "0"}},
		Clients:     []Client{{Namespace: Prefix + "p1", Target: LoadBalancerIP + ":443", Count: 1, Timeout: 3 * time.Second}},
	}
}
