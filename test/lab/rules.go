package lab

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
)

// natTable accumulates an iptables-restore (or ip6tables-restore) nat
// table of one family: chain declarations first, then rules, as
// iptables-save prints them.
type natTable struct {
	f      Family
	chains []string
	rules  []string
}

func (t *natTable) chain(names ...string) {
	for _, n := range names {
		t.chains = append(t.chains, ":"+n+" - [0:0]")
	}
}

func (t *natTable) add(format string, args ...any) {
	t.rules = append(t.rules, fmt.Sprintf(format, args...))
}

func (t *natTable) String() string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	for _, c := range t.chains {
		b.WriteString(c + "\n")
	}
	for _, r := range t.rules {
		b.WriteString(r + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// chainHash names a chain the way kube-proxy does: a prefix and 16
// characters of base32 of a SHA-256.
func chainHash(prefix, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// kubeProxyBase is what kube-proxy (iptables mode) writes on every node.
func kubeProxyBase(t *natTable) {
	t.chain("KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ")
	t.add(`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	t.add(`-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	t.add(`-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`)
	t.add(`-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000`)
	t.add(`-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN`)
	t.add(`-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0`)
	t.add(`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	service{name: "noise", clusterIP: t.f.NoiseService, port: fmt.Sprint(NoisePort), endpoints: []endpoint{{t.f.Pod2, fmt.Sprint(NoiseEndpointPort)}}}.write(t)
}

// kubeProxyNodePorts must be the last rule of KUBE-SERVICES.
func kubeProxyNodePorts(t *natTable) {
	t.add(`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`)
}

// flannel (v0.20 and later) writes its masquerade rules for its node's pod
// subnet in a chain of its own, FLANNEL-POSTRTG, jumped to from
// POSTROUTING; staleRETURN is the rule a flanneld killed without cleanup
// left behind for another node's subnet, before the MASQUERADE that SNATs
// node traffic to pods. The rules and their order are flannel's
// (pkg/trafficmngr/iptables, masqRules); the mark is kube-proxy's, whose
// own chain masquerades what it marked.
func flannel(t *natTable, podCIDR, staleRETURN string) {
	cidr, masq := t.f.ClusterCIDR, `-m comment --comment "flanneld masq"`
	t.chain("FLANNEL-POSTRTG")
	t.add(`-A POSTROUTING %s -j FLANNEL-POSTRTG`, masq)
	t.add(`-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 %s -j RETURN`, masq)
	t.add(`-A FLANNEL-POSTRTG -s %s -d %s %s -j RETURN`, podCIDR, cidr, masq)
	t.add(`-A FLANNEL-POSTRTG -s %s -d %s %s -j RETURN`, cidr, podCIDR, masq)
	if staleRETURN != "" {
		t.add(`-A FLANNEL-POSTRTG ! -s %s -d %s %s -j RETURN`, cidr, staleRETURN, masq)
	}
	t.add(`-A FLANNEL-POSTRTG ! -s %s -d %s %s -j RETURN`, cidr, podCIDR, masq)
	t.add(`-A FLANNEL-POSTRTG -s %s ! -d %s %s -j MASQUERADE --random-fully`, cidr, t.f.Multicast, masq)
	t.add(`-A FLANNEL-POSTRTG ! -s %s -d %s %s -j MASQUERADE --random-fully`, cidr, cidr, masq)
}

type endpoint struct{ ip, port string }

// service is one kube-proxy Service: KUBE-SVC with a random choice among
// its endpoints' KUBE-SEP chains. masqOffCluster adds the rule kube-proxy
// writes with --cluster-cidr: traffic from outside the cluster is marked
// for MASQUERADE.
type service struct {
	name, clusterIP, port string
	proto                 string // "tcp" when empty
	endpoints             []endpoint
	masqOffCluster        bool
}

func (s service) svcChain() string { return chainHash("KUBE-SVC-", s.name) }

func (s service) write(t *natTable) {
	proto := s.proto
	if proto == "" {
		proto = "tcp"
	}
	svc := s.svcChain()
	t.chain(svc)
	comment := fmt.Sprintf(`"default/%s cluster IP"`, s.name)
	t.add(`-A KUBE-SERVICES -d %s -p %s -m comment --comment %s -m %s --dport %s -j %s`, t.f.host(s.clusterIP), proto, comment, proto, s.port, svc)
	if s.masqOffCluster {
		t.add(`-A %s ! -s %s -d %s -p tcp -m comment --comment %s -m tcp --dport %s -j KUBE-MARK-MASQ`, svc, t.f.ClusterCIDR, t.f.host(s.clusterIP), comment, s.port)
	}
	for i, ep := range s.endpoints {
		sep := chainHash("KUBE-SEP-", s.name+ep.ip)
		t.chain(sep)
		to := t.f.HostPort(ep.ip, ep.port)
		if left := len(s.endpoints) - i; left > 1 {
			t.add(`-A %s -m comment --comment "default/%s -> %s" -m statistic --mode random --probability %.11f -j %s`, svc, s.name, to, 1/float64(left), sep)
		} else {
			t.add(`-A %s -m comment --comment "default/%s -> %s" -j %s`, svc, s.name, to, sep)
		}
		t.add(`-A %s -s %s -m comment --comment "default/%s" -j KUBE-MARK-MASQ`, sep, t.f.host(ep.ip), s.name)
		t.add(`-A %s -p %s -m comment --comment "default/%s" -m %s -j DNAT --to-destination %s`, sep, proto, s.name, proto, to)
	}
}

// loadBalancerFirewalled writes what kube-proxy (1.28 and later) writes
// for the Service's load-balancer address lb and its port with source
// ranges (loadBalancerSourceRanges): a KUBE-FW chain that lets only those through
// to the external chain, and in the filter table (returned, for
// iptables-restore) the DROP in KUBE-PROXY-FIREWALL that whatever it let
// pass meets, still addressed to lb.
func (s service) loadBalancerFirewalled(t *natTable, lb string, ranges ...string) (filter string) {
	ext := chainHash("KUBE-EXT-", s.name)
	t.chain(ext)
	comment := fmt.Sprintf(`"default/%s loadbalancer IP"`, s.name)
	t.add(`-A %s -m comment --comment "masquerade traffic for default/%s external destinations" -j KUBE-MARK-MASQ`, ext, s.name)
	t.add(`-A %s -j %s`, ext, s.svcChain())
	fw := chainHash("KUBE-FW-", s.name)
	t.chain(fw)
	t.add(`-A KUBE-SERVICES -d %s -p tcp -m comment --comment %s -m tcp --dport %s -j %s`, t.f.host(lb), comment, s.port, fw)
	for _, r := range ranges {
		t.add(`-A %s -s %s -m comment --comment %s -j %s`, fw, r, comment, ext)
	}
	t.add(`-A %s -m comment --comment "other traffic to default/%s will be dropped by KUBE-PROXY-FIREWALL"`, fw, s.name)
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-PROXY-FIREWALL - [0:0]\n")
	for _, hook := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		fmt.Fprintf(&b, "-A %s -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL\n", hook)
	}
	fmt.Fprintf(&b, "-A KUBE-PROXY-FIREWALL -d %s -p tcp -m comment --comment \"default/%s traffic not accepted by %s\" -m tcp --dport %s -j DROP\nCOMMIT\n",
		t.f.host(lb), s.name, fw, s.port)
	return b.String()
}

// loadBalancerLocal writes what kube-proxy (1.28 and later) writes for the
// Service's load-balancer address lb with externalTrafficPolicy: Local and
// the given endpoints on this node: the external chain, which sends pods'
// and the node's own traffic to every endpoint and the rest to the local
// ones only (KUBE-SVL); and, in the filter table (returned),
// KUBE-EXTERNAL-SERVICES, which drops what comes from outside while no
// endpoint is local.
func (s service) loadBalancerLocal(t *natTable, lb string, local []endpoint) (filter string) {
	ext, svl := chainHash("KUBE-EXT-", s.name), chainHash("KUBE-SVL-", s.name)
	t.chain(ext, svl)
	t.add(`-A KUBE-SERVICES -d %s -p tcp -m comment --comment "default/%s loadbalancer IP" -m tcp --dport %s -j %s`, t.f.host(lb), s.name, s.port, ext)
	t.add(`-A %s -s %s -m comment --comment "pod traffic for default/%s external destinations" -j %s`, ext, t.f.ClusterCIDR, s.name, s.svcChain())
	t.add(`-A %s -m comment --comment "masquerade LOCAL traffic for default/%s external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`, ext, s.name)
	t.add(`-A %s -m comment --comment "route LOCAL traffic for default/%s external destinations" -m addrtype --src-type LOCAL -j %s`, ext, s.name, s.svcChain())
	t.add(`-A %s -j %s`, ext, svl)
	for _, ep := range local {
		t.add(`-A %s -m comment --comment "default/%s -> %s" -j %s`, svl, s.name, t.f.HostPort(ep.ip, ep.port), chainHash("KUBE-SEP-", s.name+ep.ip))
	}
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-EXTERNAL-SERVICES - [0:0]\n")
	for _, hook := range []string{"INPUT", "FORWARD"} {
		fmt.Fprintf(&b, "-A %s -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES\n", hook)
	}
	if len(local) == 0 {
		fmt.Fprintf(&b, "-A KUBE-EXTERNAL-SERVICES -d %s -p tcp -m comment --comment \"default/%s has no local endpoints\" -m tcp --dport %s -j DROP\n",
			t.f.host(lb), s.name, s.port)
	}
	return b.String() + "COMMIT\n"
}

// hostPort is what the CNI portmap plugin writes for one container's
// hostPort mapping.
func hostPort(t *natTable, containerID, hostPortNum, podIP, podPort string) {
	chain := "CNI-DN-" + fmt.Sprintf("%x", sha256.Sum256([]byte(containerID)))[:21]
	t.chain(chain)
	t.add(`-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"cbr0\" id: \"%s\"" -m multiport --dports %s -j %s`, containerID, hostPortNum, chain)
	t.add(`-A %s -s %s -p tcp -m tcp --dport %s -j CNI-HOSTPORT-SETMARK`, chain, nodes[0].addrs(t.f).podCIDR, hostPortNum)
	t.add(`-A %s -s %s -p tcp -m tcp --dport %s -j CNI-HOSTPORT-SETMARK`, chain, t.f.host(t.f.Loopback), hostPortNum)
	t.add(`-A %s -p tcp -m tcp --dport %s -j DNAT --to-destination %s`, chain, hostPortNum, t.f.HostPort(podIP, podPort))
}

func portmapBase(t *natTable) {
	t.chain("CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-SETMARK", "CNI-HOSTPORT-MASQ")
	t.add(`-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT`)
	t.add(`-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT`)
	t.add(`-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ`)
	t.add(`-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE`)
	t.add(`-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000`)
}
