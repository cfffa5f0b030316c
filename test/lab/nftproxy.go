package lab

import (
	"fmt"
	"os/exec"
	"strings"
)

// nftProxy is what kube-proxy writes in its nftables mode: a table of its
// own, "ip kube-proxy", where a verdict map sends each Service address,
// protocol and port to the Service's chain, which picks an endpoint chain
// (numgen), which DNATs; packets marked on the way are masqueraded at
// POSTROUTING. Its filter chains reject a new connection to a Service
// without endpoints, through another verdict map whose elements carry the
// Service in a comment. The layout and names follow kube-proxy's
// (service-HASH-namespace/name/protocol/port,
// endpoint-HASH-...__address/port).
type nftProxy struct {
	services []nftService
}

// KubeProxyNftables is kube-proxy's nftables table for one Service,
// default/name at clusterIP:port (its port named as its number), with its
// endpoints (ip:port); with none, the Service has no endpoints and
// kube-proxy rejects connections to it.
func KubeProxyNftables(name, clusterIP, port string, endpoints ...string) string {
	s := nftService{name: name, clusterIP: clusterIP, port: port}
	for _, ep := range endpoints {
		ip, port, _ := strings.Cut(ep, ":")
		s.endpoints = append(s.endpoints, endpoint{ip, port})
	}
	return nftProxy{services: []nftService{s}}.String()
}

// nftService is one Service. external, when set, is a load-balancer
// address; local says externalTrafficPolicy: Local, where kube-proxy sends
// external traffic straight to a local endpoint without marking it for
// masquerade.
type nftService struct {
	name, clusterIP, port string
	endpoints             []endpoint
	masqOffCluster        bool
	external              string
	local                 bool
}

func (s nftService) id() string { return "default/" + s.name + "/tcp/" + s.port }

func (s nftService) chain(kind string) string {
	return fmt.Sprintf("%s-%s-%s", kind, chainHash("", kind+s.id())[:8], s.id())
}

func (s nftService) endpointChain(ep endpoint) string {
	id := s.id() + "__" + ep.ip + "/" + ep.port
	return fmt.Sprintf("endpoint-%s-%s", chainHash("", "endpoint"+id)[:8], id)
}

func (p nftProxy) String() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	var elements, noEndpoints []string
	for _, s := range p.services {
		if len(s.endpoints) == 0 {
			noEndpoints = append(noEndpoints, fmt.Sprintf("%s . tcp . %s comment %q : goto reject-chain", s.clusterIP, s.port, "default/"+s.name+":"+s.port))
			continue
		}
		elements = append(elements, fmt.Sprintf("%s . tcp . %s : goto %s", s.clusterIP, s.port, s.chain("service")))
		if s.external != "" {
			elements = append(elements, fmt.Sprintf("%s . tcp . %s : goto %s", s.external, s.port, s.chain("external")))
		}
	}
	w("table ip kube-proxy {")
	w("\tcomment \"rules for kube-proxy\"")
	verdictMap(w, "service-ips", "ClusterIP, ExternalIP and LoadBalancer IP traffic", elements)
	verdictMap(w, "no-endpoint-services", "vmap to drop or reject packets to services with no endpoints", noEndpoints)
	w("\tchain filter-output {\n\t\ttype filter hook output priority filter; policy accept;\n\t\tct state new jump service-endpoints-check\n\t}")
	w("\tchain filter-forward {\n\t\ttype filter hook forward priority filter; policy accept;\n\t\tct state new jump service-endpoints-check\n\t}")
	w("\tchain filter-input {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tct state new jump service-endpoints-check\n\t}")
	w("\tchain service-endpoints-check {\n\t\tip daddr . meta l4proto . th dport vmap @no-endpoint-services\n\t}")
	w("\tchain reject-chain {\n\t\tcomment \"helper for @no-endpoint-services / @no-endpoint-nodeports\"\n\t\treject\n\t}")
	w("\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\tjump services\n\t}")
	w("\tchain nat-output {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tjump services\n\t}")
	w("\tchain nat-postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n\t\tjump masquerading\n\t}")
	w("\tchain mark-for-masquerade {\n\t\tmeta mark set meta mark | 0x00004000\n\t}")
	w("\tchain masquerading {")
	w("\t\tmeta mark & 0x00004000 == 0x00000000 return")
	w("\t\tmeta mark set meta mark ^ 0x00004000")
	w("\t\tmasquerade fully-random")
	w("\t}")
	w("\tchain services {\n\t\tip daddr . meta l4proto . th dport vmap @service-ips\n\t}")
	for _, s := range p.services {
		if len(s.endpoints) == 0 {
			continue
		}
		w("\tchain %s {", s.chain("service"))
		if s.masqOffCluster {
			w("\t\tip daddr %s tcp dport %s ip saddr != %s jump mark-for-masquerade", s.clusterIP, s.port, ClusterCIDR)
		}
		var choices []string
		for i, ep := range s.endpoints {
			choices = append(choices, fmt.Sprintf("%d : goto %s", i, s.endpointChain(ep)))
		}
		w("\t\tnumgen random mod %d vmap { %s }", len(s.endpoints), strings.Join(choices, ", "))
		w("\t}")
		if s.external != "" {
			w("\tchain %s {", s.chain("external"))
			if s.local {
				w("\t\tgoto %s comment \"externalTrafficPolicy: Local\"", s.endpointChain(s.endpoints[0]))
			} else {
				w("\t\tjump mark-for-masquerade comment \"masquerade traffic for %s external destinations\"", s.id())
				w("\t\tgoto %s", s.chain("service"))
			}
			w("\t}")
		}
		for _, ep := range s.endpoints {
			w("\tchain %s {", s.endpointChain(ep))
			w("\t\tip saddr %s jump mark-for-masquerade", ep.ip)
			w("\t\tmeta l4proto tcp dnat to %s:%s comment \"%s\"", ep.ip, ep.port, s.id())
			w("\t}")
		}
	}
	w("}")
	return b.String()
}

// verdictMap writes a map of address, protocol and port to verdicts; an
// empty map has no elements line.
func verdictMap(w func(string, ...any), name, comment string, elements []string) {
	w("\tmap %s {", name)
	w("\t\ttype ipv4_addr . inet_proto . inet_service : verdict")
	w("\t\tcomment %q", comment)
	if len(elements) > 0 {
		w("\t\telements = { %s }", strings.Join(elements, ", "))
	}
	w("\t}")
}

// nftRestore loads an nft script in a namespace.
func nftRestore(ns, script string) error {
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f in %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// natBase is node 1's iptables nat table in kube-proxy's nftables mode:
// flannel's rules alone (kube-proxy writes none there).
func natBase(podCIDR string) string {
	t := natTable{f: IPv4}
	flannel(&t, podCIDR, "")
	return t.String()
}

// noiseService is the background traffic's Service (Noise), as kube-proxy's
// nftables mode writes it.
var noiseService = nftService{name: "noise", clusterIP: NoiseServiceIP, port: fmt.Sprint(NoisePort), endpoints: []endpoint{{Pod2IP, fmt.Sprint(NoiseEndpointPort)}}}

// 3 in nftables mode: node 1 runs kube-proxy's nftables mode.
func servicePathsNft(bool, Family) *Scenario {
	sc := servicePaths(true, IPv4)
	sc.Description += " (kube-proxy in nftables mode)"
	sc.Rules[NsNode1] = natBase(nodes[0].v4.podCIDR)
	sc.Nft = map[string]string{NsNode1: nftProxy{services: []nftService{noiseService,
		{name: "paths", clusterIP: PathsServiceIP, port: "80", masqOffCluster: true, endpoints: []endpoint{{Pod1IP, "8080"}, {Pod2IP, "8080"}}}}}.String()}
	return sc
}

// 5 in nftables mode: externalTrafficPolicy: Local sends the load
// balancer's traffic to the local ingress pod unmarked.
func hairpinNft(healthy bool, _ Family) *Scenario {
	sc := hairpin(healthy, IPv4)
	sc.Description += " (kube-proxy in nftables mode)"
	sc.Rules[NsNode1] = natBase(nodes[0].v4.podCIDR)
	sc.Nft = map[string]string{NsNode1: nftProxy{services: []nftService{noiseService,
		{name: "ingress", clusterIP: "10.96.0.40", port: "443", endpoints: []endpoint{{IngressPodIP, "443"}}, external: LoadBalancerIP, local: !healthy}}}.String()}
	return sc
}
