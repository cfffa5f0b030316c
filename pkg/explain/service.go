package explain

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// servicePortName matches kube-proxy's name of a Service port:
// namespace/name, and :port when the port is named (DNS labels).
var servicePortName = regexp.MustCompile(`^([a-z0-9][-a-z0-9]*)/([a-z0-9][-a-z0-9.]*)(?::([-a-z0-9]+))?$`)

// kubeProxyDrops are why kube-proxy's iptables mode drops or rejects, as
// its rules' comments say after the Service ("ns/svc:port has no
// endpoints"), and what the user is to make of it.
var kubeProxyDrops = []struct{ prefix, why string }{
	{"has no endpoints", "the Service has no endpoints (no ready pod backs it), so kube-proxy rejects new connections to it"},
	{"has no local endpoints", "the Service's externalTrafficPolicy is Local and no endpoint runs on this node, so kube-proxy drops what comes from outside: " +
		"have the load balancer send only to nodes that pass the Service's health check (its healthCheckNodePort), run an endpoint on this node, " +
		"or set externalTrafficPolicy: Cluster (the client's address is then lost to SNAT)"},
	{"traffic not accepted by KUBE-FW-", "the source is not in the Service's loadBalancerSourceRanges, which its KUBE-FW chain lets through: add the client's range to spec.loadBalancerSourceRanges, or call from an allowed address"},
}

// kubeProxyDrop says why kube-proxy's iptables mode dropped, from what
// its rule's comment says after the Service; "" when it says nothing
// kube-proxy writes.
func kubeProxyDrop(comment string) string {
	for _, d := range kubeProxyDrops {
		if strings.HasPrefix(comment, d.prefix) {
			return d.why
		}
	}
	return ""
}

// addressKinds are the suffixes of kube-proxy's comments on the jumps out
// of KUBE-SERVICES, and what they say of the destination address.
var addressKinds = []struct{ suffix, kind string }{
	{" cluster IP", service.ClusterIP},
	{" external IP", service.ExternalIP},
	{" loadbalancer IP", service.LoadBalancerIP},
}

// serviceOfNAT is the Service a DNAT rule of kube-proxy's translates for,
// from the rule and the jumps that led to it; nil for any other rule.
func serviceOfNAT(r *ruleset.Rule, via []*ruleset.Rule) *service.Service {
	if r == nil || (r.Target != "DNAT" && !strings.Contains(r.Text, "dnat to ")) {
		return nil
	}
	s := serviceOfComment(r.Comment)
	if s == nil {
		s = serviceOfChain(r.Chain)
	}
	if s == nil {
		return nil
	}
	for _, j := range via {
		switch {
		case j.Chain == "KUBE-NODEPORTS" || strings.HasPrefix(j.Chain, "nodeport"):
			s.Address = service.NodePort
		case strings.HasPrefix(j.Target, "external-") || strings.HasPrefix(j.Chain, "external-"):
			s.Address = externalOrLoadBalancerIP
		}
		for _, k := range addressKinds {
			if strings.HasSuffix(j.Comment, k.suffix) {
				s.Address = k.kind
			}
		}
	}
	return s
}

// externalOrLoadBalancerIP is how kube-proxy's nftables mode addresses a
// Service through its external chain: the chain is the same for both.
const externalOrLoadBalancerIP = "external or load balancer IP"

// serviceOfDrop is the Service a DROP or REJECT of kube-proxy's is for:
// its nftables mode rejects a connection to a Service without endpoints
// through an element of its no-endpoint-services map, whose comment names
// the Service (firewall-ips likewise); its iptables mode names it first in
// the rule's comment, with why (kubeProxyDrops). nil for any other rule.
func serviceOfDrop(r *ruleset.Rule, via []*ruleset.Rule) *service.Service {
	if r == nil || (r.Target != "DROP" && r.Target != "REJECT") {
		return nil
	}
	if s := serviceOfComment(r.Comment); s != nil {
		return s
	}
	if name, why, ok := strings.Cut(r.Comment, " "); ok && kubeProxyDrop(why) != "" {
		return serviceOfComment(name)
	}
	for i := len(via) - 1; i >= 0; i-- {
		if s := serviceOfComment(via[i].Comment); s != nil {
			return s
		}
	}
	return nil
}

// serviceOfComment reads kube-proxy's iptables comment on an endpoint's
// DNAT: the Service's port name alone.
func serviceOfComment(comment string) *service.Service {
	m := servicePortName.FindStringSubmatch(comment)
	if m == nil {
		return nil
	}
	return &service.Service{Namespace: m[1], Name: m[2], Port: m[3]}
}

// serviceOfChain reads the name of one of kube-proxy's nftables chains for
// a Service: KIND-HASH-namespace/name/protocol/port, an endpoint's with
// __address/port after it.
func serviceOfChain(chain string) *service.Service {
	kind, rest, ok := strings.Cut(chain, "-")
	if !ok || (kind != "service" && kind != "endpoint" && kind != "external") {
		return nil
	}
	_, id, ok := strings.Cut(rest, "-")
	if !ok {
		return nil
	}
	id, _, _ = strings.Cut(id, "__")
	f := strings.Split(id, "/")
	if len(f) != 4 || !servicePortName.MatchString(f[0]+"/"+f[1]) {
		return nil
	}
	port := f[3]
	if port != "" && port[0] >= '0' && port[0] <= '9' {
		port = "" // an unnamed port: its number, which the address already shows
	}
	return &service.Service{Namespace: f[0], Name: f[1], Port: port}
}

// serviceOf is the Service event d of packet p was DNATed for: as the rule
// of kube-proxy's that decided names it (among rules when the finding
// names them already, else as the namespace's ruleset says), completed by
// the Services the API lists, which name it also where no rule does (a
// proxy that names nothing, a ruleset not known) and say how it was
// addressed where the rule does not (nftables mode's chains); nil when
// neither knows. Where the two name different Services the rule wins: it
// is what the kernel did, and the API's list may be behind.
func serviceOf(n Context, p *flow.Packet, d *event.Event, rules []NetfilterRule) *service.Service {
	if rules == nil {
		rules = natRules(n, p, d)
	}
	var named *service.Service
	for _, r := range rules {
		if r.Role == RoleDecided && r.Service != nil {
			named = r.Service
			break
		}
	}
	pre := d.NAT.Pre
	listed, ok := n.ServiceAt(pre.Proto, dst(pre))
	switch {
	case !ok:
		return named
	case named == nil:
		return &listed
	case (named.Address == "" || named.Address == externalOrLoadBalancerIP) && named.Namespace == listed.Namespace && named.Name == listed.Name:
		completed := *named
		completed.Address = listed.Address
		return &completed
	}
	return named
}

// withService is an address, and the Service it stands for when known.
func withService(addr netip.AddrPort, s *service.Service) string {
	if s == nil {
		return addr.String()
	}
	return addr.String() + " (" + s.String() + ")"
}
