package lab

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Addresses the scenarios use (IPv4; Family has both families').
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
	ClashQueue       = 7            // conntrack-clash: node 2's netfilter queue
	SelfServiceIP    = "10.96.0.41" // hairpin-mode: ClusterIP whose only endpoint is its caller, p1
	UnderlayCIDR     = "172.20.0.0/24"
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
	// OutOfWindow, when set, is the peer the client reaches: once the
	// reply is read, a segment from it far past the client's window
	// reaches the client (sendOutOfWindow).
	OutOfWindow *Peer
	// SrcPort, when set, is the port the client binds (with Src, or any
	// address of its namespace).
	SrcPort int
	// Alongside starts the client 20 ms after the one before it, instead
	// of once that one is done.
	Alongside bool
	// Keep holds each connection open until all clients are done.
	Keep bool
	// ServedByEach, for a sequential TCP client, names servers each of
	// which must have answered: after its Count connections the client
	// goes on connecting, up to maxServedByEach more, until each has. A
	// Service's endpoint is chosen at random (kube-proxy's rules): a
	// check that needs every endpoint's path waits for it, never on
	// chance.
	ServedByEach []string
	// UDP makes the client send Count datagrams from one socket, each
	// awaiting its answer for Timeout, as a resolver does (exchange).
	UDP bool
	// Midway, for a UDP client, runs once half its datagrams are sent:
	// a change to the cluster, made while the client goes on.
	Midway func() error
}

// Scenario is one incident (or its healthy twin) ready to build.
type Scenario struct {
	Name        string
	Healthy     bool
	Family      Family // the family of its fault, clients and servers
	Description string
	Pods        []Pod
	Servers     []Server
	// Rules are the iptables-restore (ip6tables-restore) inputs of
	// Family, by namespace; the nodes' rules of the other family are the
	// healthy base.
	Rules   map[string]string
	Nft     map[string]string // namespace -> nft -f input (kube-proxy's nftables mode)
	Sysctls [][3]string       // namespace, key, value
	Extra   [][]string        // further commands
	// Prepare, when set, finishes the lab once its rules are in, before
	// its servers start.
	Prepare func() error
	Queues  []Queue // netfilter queues served
	Clients []Client
	// ConntrackMax, when set, is the kernel's conntrack limit while the
	// scenario is up (where the kernel is the tests' own: setConntrackMax).
	ConntrackMax int
	// HairpinOff leaves the bridge plugin's hairpinMode off for every pod:
	// its default, which kubenet and hand-written CNI configurations keep.
	HairpinOff bool
	// PodMTU, when set, is the MTU the bridge plugin gives every pod.
	PodMTU int
	// HostVeths are the node's ends of the pods' veths, which the bridge
	// plugin names at random (vethXXXXXXXX), with their pods: set by Up.
	HostVeths map[string]string
}

func (s *Scenario) pod(name string) Pod {
	for _, p := range s.Pods {
		if p.Name == name {
			return p
		}
	}
	panic("lab: scenario " + s.Name + " has no pod " + name)
}

// rules are the scenario's rules of family f: its own in its family,
// kube-proxy's and flannel's healthy base in the other.
func (s *Scenario) rules(f Family) map[string]string {
	if f.IPv6 == s.Family.IPv6 {
		return s.Rules
	}
	return map[string]string{NsNode1: nodeRules(f, 0), NsNode2: nodeRules(f, 1)}
}

// basePods are in every scenario: the two pods incidents involve and q1,
// which only makes background traffic (Noise).
var basePods = []Pod{{"p1", 1, Pod1IP, IPv6.Pod1}, {"p2", 2, Pod2IP, IPv6.Pod2}, noisePod}

// withPods is basePods and more.
func withPods(more ...Pod) []Pod { return append(append([]Pod{}, basePods...), more...) }

// nodeBase starts a node's nat table in family f (node 0 or 1) with
// kube-proxy's base chains and flannel's masquerade, healthy: what every
// scenario's node has before its Services.
func nodeBase(f Family, node int) natTable {
	t := natTable{f: f}
	kubeProxyBase(&t)
	flannel(&t, nodes[node].addrs(f).podCIDR, "")
	return t
}

// nodeRules is a node's nat table in family f: kube-proxy and flannel,
// no services of interest.
func nodeRules(f Family, node int) string {
	t := nodeBase(f, node)
	kubeProxyNodePorts(&t)
	return t.String()
}

type builder func(healthy bool, f Family) *Scenario

// definition declares a lab scenario once: Names, Lookup and Incidents
// (the tests' table) derive from definitions.
type definition struct {
	name  string
	build builder
	// healthyOnly: no faulty version; NAME is its healthy setup.
	healthyOnly bool
	// ipv6: it has an IPv6 variant, NAME-v6, in the dual-stack lab
	// (kube-proxy's nftables mode is IPv4 only here).
	ipv6 bool
	// ownKernel: it changes what the whole kernel allows, and runs only
	// where the kernel is the tests' own (OwnKernelEnv).
	ownKernel bool
	// filter is what a user would type to watch its incident.
	filter func(f Family) string
}

var definitions = []definition{
	{name: "snat-missing", build: snatMissing, ipv6: true, filter: func(f Family) string { return "host " + f.SNATService }},
	{name: "syn-overflow", build: synOverflow, ipv6: true, filter: func(f Family) string { return f.only(fmt.Sprint("port ", NodePort)) }},
	{name: "service-paths", build: servicePaths, healthyOnly: true, ipv6: true, filter: func(f Family) string { return "host " + f.PathsService }},
	{name: "stale-hostport", build: staleHostPort, ipv6: true, filter: func(f Family) string { return f.only(fmt.Sprint("port ", HostPortNum)) }},
	{name: "hairpin", build: hairpin, ipv6: true, filter: func(f Family) string { return "host " + f.LoadBalancer }},
	// kube-proxy's nftables mode: native nftables rules.
	{name: "service-paths-nft", build: servicePathsNft, healthyOnly: true, filter: func(f Family) string { return "host " + f.PathsService }},
	{name: "hairpin-nft", build: hairpinNft, filter: func(f Family) string { return "host " + f.LoadBalancer }},
	{name: "conntrack-clash", build: conntrackClash, filter: func(f Family) string { return fmt.Sprintf("host %s and port %d", f.Pod2, PodPort) }},
	{name: "hairpin-mode", build: hairpinMode, filter: func(Family) string { return "host " + SelfServiceIP }},
	{name: "lb-source-ranges", build: lbSourceRanges, filter: func(f Family) string { return "host " + f.LoadBalancer }},
	{name: "lb-local-no-endpoint", build: lbLocalNoEndpoint, filter: func(f Family) string { return "host " + f.LoadBalancer }},
	{name: "conntrack-invalid", build: conntrackInvalid, filter: func(f Family) string { return "host " + StreamServiceIP + " or host " + f.Pod2 }},
	{name: "stale-udp-entry", build: staleUDPEntry, filter: func(Family) string { return "host " + DNSServiceIP + " or host " + OldDNSPodIP }},
	{name: "snat-port-clash", build: snatPortClash, filter: func(Family) string { return fmt.Sprint("port ", DatabasePort) }},
	{name: "mtu-black-hole", build: mtuBlackHole, filter: func(f Family) string { return "host " + f.Pod2 }},
	{name: "conntrack-table-full", build: conntrackTableFull, ownKernel: true,
		filter: func(f Family) string { return fmt.Sprintf("host %s and port %d", f.Pod2, PodPort) }},
}

// only narrows a filter to the family's packets where, without it, the
// other family's would match too (a port).
func (f Family) only(filter string) string {
	if f.IPv6 {
		return "ip6 and " + filter
	}
	return filter
}

// Incident is a scenario in one family, as the tests run it.
type Incident struct {
	Name string // NAME, or NAME-v6 for the IPv6 variant
	// Kind is NAME in both families: what the incident must show is the
	// same.
	Kind string
	// Twins: NAME shows the fault and NAME-healthy its twin; otherwise
	// NAME alone, healthy.
	Twins     bool
	OwnKernel bool
	Filter    string // what a user would type to watch it
}

// Incidents lists every scenario in each of its families: the IPv4 ones
// first, in the order they are declared.
func Incidents() []Incident {
	var out []Incident
	for _, f := range []Family{IPv4, IPv6} {
		for _, d := range definitions {
			if f.IPv6 && !d.ipv6 {
				continue
			}
			out = append(out, Incident{Name: d.name + f.Suffix(), Kind: d.name, Twins: !d.healthyOnly, OwnKernel: d.ownKernel, Filter: d.filter(f)})
		}
	}
	return out
}

// Names lists every scenario and twin.
func Names() []string {
	var out []string
	for _, in := range Incidents() {
		if in.Twins {
			out = append(out, in.Name)
		}
		out = append(out, in.Name+"-healthy")
	}
	sort.Strings(out)
	return out
}

// Lookup returns the named scenario ("NAME", "NAME-healthy", "NAME-v6" or
// "NAME-v6-healthy").
func Lookup(name string) (*Scenario, error) {
	base, healthy := strings.CutSuffix(name, "-healthy")
	base, v6 := strings.CutSuffix(base, IPv6.Suffix())
	i := slices.IndexFunc(definitions, func(d definition) bool { return d.name == base })
	if i < 0 || (v6 && !definitions[i].ipv6) || (definitions[i].healthyOnly && !healthy && name != base+familyOf(v6).Suffix()) {
		return nil, fmt.Errorf("unknown scenario %q; scenarios: %s", name, strings.Join(Names(), ", "))
	}
	d := definitions[i]
	f := familyOf(v6)
	sc := d.build(healthy || d.healthyOnly, f)
	sc.Name, sc.Healthy, sc.Family = name, healthy || d.healthyOnly, f
	if healthy && !d.healthyOnly {
		sc.Description = "healthy twin (without the fault) of: " + sc.Description
	}
	return sc, nil
}

// 1. A process on node 1 calls a ClusterIP whose pod is on node 2. A stale
// flannel RETURN before the MASQUERADE leaves it un-SNATed in the tunnel;
// the pod answers the node's eth0 address over the underlay, where strict
// reverse-path filtering drops the reply (it should come from the tunnel):
// rp_filter=1 for IPv4, and for IPv6, which has no rp_filter sysctl, the
// rpfilter match firewalld installs in ip6tables' raw PREROUTING.
func snatMissing(healthy bool, f Family) *Scenario {
	t := natTable{f: f}
	kubeProxyBase(&t)
	stale := nodes[1].addrs(f).podCIDR
	if healthy {
		stale = ""
	}
	flannel(&t, nodes[0].addrs(f).podCIDR, stale)
	service{name: "web", clusterIP: f.SNATService, port: "80", endpoints: []endpoint{{f.Pod2, "8080"}}}.write(&t)
	kubeProxyNodePorts(&t)
	sc := &Scenario{
		Description: "node 1 calls ClusterIP " + f.HostPort(f.SNATService, 80) + " (pod on node 2); stale flannel RETURN skips the MASQUERADE; strict reverse-path filtering",
		Pods:        basePods,
		Servers:     []Server{{Pod: "p2", Port: PodPort, Accept: true}},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: nodeRules(f, 1)},
		Clients:     []Client{{Namespace: NsNode1, Target: f.HostPort(f.SNATService, 80), Count: 1, Timeout: 3 * time.Second}},
	}
	if f.IPv6 {
		sc.Extra = [][]string{{"ip", "netns", "exec", NsNode1, "ip6tables", "-t", "raw", "-A", "PREROUTING",
			"-m", "rpfilter", "--invert", "-m", "comment", "--comment", "rpfilter", "-j", "DROP"}}
		return sc
	}
	sc.Sysctls = [][3]string{
		{NsNode1, "net.ipv4.conf.all.rp_filter", "1"},
		{NsNode1, "net.ipv4.conf.eth0.rp_filter", "1"},
	}
	return sc
}

// 2. External clients call a NodePort on node 1 whose pod listens with a
// tiny backlog and never accepts: the accept queue fills and further SYNs
// are dropped by the listener.
func synOverflow(healthy bool, f Family) *Scenario {
	t := nodeBase(f, 0)
	svc := service{name: "echo", clusterIP: f.EchoService, port: "80", endpoints: []endpoint{{f.Pod1, "8080"}}}
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
		Description: fmt.Sprintf("8 clients call NodePort %s; the pod listens with backlog %d and does not accept", f.HostPort(f.Node1, NodePort), SYNOverflowQueue),
		Pods:        basePods,
		Servers:     []Server{server},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: nodeRules(f, 1)},
		Clients: []Client{{Namespace: NsUnderlay, Target: f.HostPort(f.Node1, NodePort), Count: 8,
			Concurrent: true, Timeout: 3 * time.Second}},
	}
}

// 3. Node 1 calls a ClusterIP with one endpoint on each node (the walk of
// seed 002: KUBE-SERVICES, KUBE-MARK-MASQ, KUBE-SVC random choice,
// KUBE-SEP DNAT, KUBE-POSTROUTING MASQUERADE).
func servicePaths(_ bool, f Family) *Scenario {
	t := nodeBase(f, 0)
	service{name: "paths", clusterIP: f.PathsService, port: "80", masqOffCluster: true,
		endpoints: []endpoint{{f.Pod1, "8080"}, {f.Pod2, "8080"}}}.write(&t)
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: "node 1 calls ClusterIP " + f.HostPort(f.PathsService, 80) + " with endpoints on node 1 and node 2",
		Pods:        basePods,
		Servers:     []Server{{Pod: "p1", Port: PodPort, Accept: true}, {Pod: "p2", Port: PodPort, Accept: true}},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: nodeRules(f, 1)},
		Clients: []Client{{Namespace: NsNode1, Target: f.HostPort(f.PathsService, 80), Count: 16, Timeout: 3 * time.Second,
			ServedByEach: []string{"p1", "p2"}}},
	}
}

// 4. A hostPort on node 1 has two CNI-DN chains: the first, left behind by
// a container whose cleanup never ran, DNATs to a pod address that no
// longer exists (ARP, or IPv6 neighbour discovery, finds nobody).
func staleHostPort(healthy bool, f Family) *Scenario {
	t := natTable{f: f}
	kubeProxyBase(&t)
	portmapBase(&t)
	flannel(&t, nodes[0].addrs(f).podCIDR, "")
	if !healthy {
		hostPort(&t, "fb7cdb0a4f8da673da0a9818ec9a1576f953a8e8decf87a081827c11e4aa7138", fmt.Sprint(HostPortNum), f.DeadHostPortPod, "443")
	}
	hostPort(&t, "2e5c1a4f0b9d7c3e8a6f4d2b1c0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e", fmt.Sprint(HostPortNum), f.LiveHostPortPod, "443")
	kubeProxyNodePorts(&t)
	// Neighbour resolution gives up after 3 probes 100 ms apart, so the
	// dead address fails within the client's timeout.
	neigh := "net.ipv4.neigh.cni0.retrans_time_ms"
	if f.IPv6 {
		neigh = "net.ipv6.neigh.cni0.retrans_time_ms"
	}
	return &Scenario{
		Description: fmt.Sprintf("an external client calls hostPort %s; a stale CNI-DN chain DNATs to %s, which no longer exists", f.HostPort(f.Node1, HostPortNum), f.DeadHostPortPod),
		Pods:        withPods(Pod{"web", 1, LiveHostPortPod, IPv6.LiveHostPortPod}),
		Servers:     []Server{{Pod: "web", Port: 443, Accept: true}},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: nodeRules(f, 1)},
		Sysctls:     [][3]string{{NsNode1, neigh, "100"}},
		Clients:     []Client{{Namespace: NsUnderlay, Target: f.HostPort(f.Node1, HostPortNum), Count: 1, Timeout: 3 * time.Second}},
	}
}

// 5. Pod p1 calls the load-balancer address of a Service whose only
// endpoint, an ingress pod, is on the same node. With
// externalTrafficPolicy: Local this kube-proxy skips KUBE-MARK-MASQ, so
// the request is not SNATed and the ingress pod answers p1 directly over
// the bridge, from its own address. Bridged traffic does not cross the
// node's iptables here (bridge-nf-call-iptables=0, as on CNIs that route
// pods without a netfilter-enabled bridge), in both twins.
func hairpin(healthy bool, f Family) *Scenario {
	t := nodeBase(f, 0)
	svc := service{name: "ingress", clusterIP: f.IngressService, port: "443", endpoints: []endpoint{{f.IngressPod, "443"}}}
	svc.write(&t)
	ext := chainHash("KUBE-EXT-", "ingress")
	t.chain(ext)
	t.add(`-A KUBE-SERVICES -d %s -p tcp -m comment --comment "default/ingress loadbalancer IP" -m tcp --dport 443 -j %s`, f.host(f.LoadBalancer), ext)
	if healthy {
		t.add(`-A %s -m comment --comment "masquerade traffic for default/ingress external destinations" -j KUBE-MARK-MASQ`, ext)
		t.add(`-A %s -j %s`, ext, svc.svcChain())
	} else {
		svl := chainHash("KUBE-SVL-", "ingress")
		t.chain(svl)
		t.add(`-A %s -j %s`, ext, svl)
		t.add(`-A %s -m comment --comment "default/ingress -> %s" -j %s`, svl, f.HostPort(f.IngressPod, 443), chainHash("KUBE-SEP-", "ingress"+f.IngressPod))
	}
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: "pod p1 calls load balancer " + f.HostPort(f.LoadBalancer, 443) + "; its only endpoint, ingress pod " + f.IngressPod + ", is on the same node",
		Pods:        withPods(Pod{"ingress", 1, IngressPodIP, IPv6.IngressPod}),
		Servers:     []Server{{Pod: "ingress", Port: 443, Accept: true}},
		Rules:       map[string]string{NsNode1: t.String(), NsNode2: nodeRules(f, 1)},
		Sysctls: [][3]string{
			{NsNode1, "net.bridge.bridge-nf-call-iptables", "0"},
			{NsNode1, "net.bridge.bridge-nf-call-ip6tables", "0"},
		},
		Clients: []Client{{Namespace: Prefix + "p1", Target: f.HostPort(f.LoadBalancer, 443), Count: 1, Timeout: 3 * time.Second}},
	}
}

// 6. Pod p1 calls pod p2 on node 2, whose node queues new connections to
// p2 (a netfilter queue, as a userspace policy agent or an IPS does). In
// the faulty twin the queue holds the first SYN until the client's
// retransmission has passed: each made its own conntrack entry in node 2,
// the retransmission's is confirmed first, and conntrack drops the first
// SYN when it confirms its own (a clash: insert_failed). The connection is
// made a second late, by the retransmission. On a busy node two packets
// of one tuple race like this at random (the five-second DNS lookups of
// Kubernetes' early years); the queue makes it certain, on kernels that
// do not resolve the clash when the queue gives the packet back (see
// ServeQueue). In the healthy twin the queue accepts every packet at once.
func conntrackClash(healthy bool, f Family) *Scenario {
	return &Scenario{
		Description: fmt.Sprintf("pod p1 calls pod p2 %s on node 2, whose node queues new connections to it; the queue holds the first SYN until its retransmission has passed",
			f.HostPort(f.Pod2, PodPort)),
		Pods:    basePods,
		Servers: []Server{{Pod: "p2", Port: PodPort, Accept: true}},
		Rules:   map[string]string{NsNode1: nodeRules(f, 0), NsNode2: nodeRules(f, 1)},
		Extra: [][]string{{"ip", "netns", "exec", NsNode2, f.iptables(), "-t", "mangle", "-A", "FORWARD",
			"-d", f.host(f.Pod2), "-p", "tcp", "--dport", fmt.Sprint(PodPort), "--syn",
			"-m", "comment", "--comment", "policy agent", "-j", "NFQUEUE", "--queue-num", fmt.Sprint(ClashQueue), "--queue-bypass"}},
		Queues:  []Queue{{Namespace: NsNode2, Num: ClashQueue, HoldFirst: !healthy}},
		Clients: []Client{{Namespace: Prefix + "p1", Target: f.HostPort(f.Pod2, PodPort), Count: 1, Timeout: 3 * time.Second}},
	}
}

// 7. Pod p1 calls a Service whose only endpoint is p1 itself
// (kubernetes#20475). kube-proxy's rules DNAT the request back to p1 and
// masquerade it (its KUBE-SEP hairpin rule); with the bridge's netfilter
// calls on, as kube-proxy needs them, a DNAT to an address on the same
// bridge keeps the frame bridged, and it must leave by the port it came
// in on. The bridge plugin's hairpinMode is off in the faulty twin, on (as
// flannel delegates it) in the healthy one.
func hairpinMode(healthy bool, f Family) *Scenario {
	t := nodeBase(f, 0)
	svc := service{name: "self", clusterIP: SelfServiceIP, port: "80", endpoints: []endpoint{{f.Pod1, fmt.Sprint(PodPort)}}}
	svc.write(&t)
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: fmt.Sprintf("pod p1 calls ClusterIP %s, whose only endpoint is p1 itself; its bridge port's hairpin mode is off",
			f.HostPort(SelfServiceIP, 80)),
		Pods:       basePods,
		HairpinOff: !healthy,
		Servers:    []Server{{Pod: "p1", Port: PodPort, Accept: true}},
		Rules:      map[string]string{NsNode1: t.String(), NsNode2: nodeRules(f, 1)},
		Sysctls:    [][3]string{{NsNode1, "net.bridge.bridge-nf-call-iptables", "1"}},
		Clients:    []Client{{Namespace: Prefix + "p1", Target: f.HostPort(SelfServiceIP, 80), Count: 1, Timeout: 3 * time.Second}},
	}
}

// 8. A client outside the cluster calls a Service's load-balancer address
// whose loadBalancerSourceRanges do not include it (a range typed wrong,
// or the client behind a NAT nobody listed): kube-proxy's KUBE-FW chain
// lets it pass untranslated, and its KUBE-PROXY-FIREWALL drops it in
// node 1's FORWARD. The underlay routes the address to node 1, as a
// load balancer's announcement would. The healthy twin lists the
// underlay's range.
func lbSourceRanges(healthy bool, f Family) *Scenario {
	t := nodeBase(f, 0)
	svc := service{name: "ingress", clusterIP: f.IngressService, port: "443", endpoints: []endpoint{{f.IngressPod, "443"}}}
	svc.write(&t)
	allowed := "203.0.113.0/25"
	if healthy {
		allowed = UnderlayCIDR
	}
	filter := svc.loadBalancerFirewalled(&t, f.LoadBalancer, allowed)
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: fmt.Sprintf("a client on the underlay calls load balancer %s, whose loadBalancerSourceRanges (%s) leave it out",
			f.HostPort(f.LoadBalancer, 443), allowed),
		Pods:    withPods(Pod{"ingress", 1, IngressPodIP, IPv6.IngressPod}),
		Servers: []Server{{Pod: "ingress", Port: 443, Accept: true}},
		Rules:   map[string]string{NsNode1: t.String() + filter, NsNode2: nodeRules(f, 1)},
		Extra:   [][]string{ipn(NsUnderlay, "route", "add", f.LoadBalancer+"/32", "via", f.Node1)},
		Clients: []Client{{Namespace: NsUnderlay, Target: f.HostPort(f.LoadBalancer, 443), Count: 1, Timeout: 3 * time.Second}},
	}
}

// 14. A client outside the cluster calls a Service's load-balancer address
// whose externalTrafficPolicy is Local (to keep the client's address), and
// the load balancer sends it to node 1, where no endpoint of the Service
// runs: its only endpoint is p2, on node 2 (the local one was rescheduled,
// and the load balancer's health check has not caught up, or it does not
// check). kube-proxy's KUBE-EXTERNAL-SERVICES drops it in node 1's
// FORWARD. In the healthy twin the Service also has the ingress pod on
// node 1, which answers.
func lbLocalNoEndpoint(healthy bool, f Family) *Scenario {
	t := nodeBase(f, 0)
	remote, local := endpoint{f.Pod2, "443"}, endpoint{f.IngressPod, "443"}
	svc := service{name: "ingress", clusterIP: f.IngressService, port: "443", endpoints: []endpoint{remote}}
	var locals []endpoint
	if healthy {
		svc.endpoints, locals = []endpoint{local, remote}, []endpoint{local}
	}
	svc.write(&t)
	filter := svc.loadBalancerLocal(&t, f.LoadBalancer, locals)
	kubeProxyNodePorts(&t)
	return &Scenario{
		Description: fmt.Sprintf("a client on the underlay calls load balancer %s, sent to node 1; its Service's externalTrafficPolicy is Local and its only endpoint, p2, is on node 2",
			f.HostPort(f.LoadBalancer, 443)),
		Pods:    withPods(Pod{"ingress", 1, IngressPodIP, IPv6.IngressPod}),
		Servers: []Server{{Pod: "ingress", Port: 443, Accept: true}, {Pod: "p2", Port: 443, Accept: true}},
		Rules:   map[string]string{NsNode1: t.String() + filter, NsNode2: nodeRules(f, 1)},
		Extra:   [][]string{ipn(NsUnderlay, "route", "add", f.LoadBalancer+"/32", "via", f.Node1)},
		Clients: []Client{{Namespace: NsUnderlay, Target: f.HostPort(f.LoadBalancer, 443), Count: 1, Timeout: 3 * time.Second}},
	}
}
