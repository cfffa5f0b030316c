package explain

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// TestServiceOfNAT: the Service of a DNAT, as kube-proxy names it in
// iptables mode (comments) and nftables mode (chain names), with how the
// packet addressed it; nothing for a rule that is not kube-proxy's.
func TestServiceOfNAT(t *testing.T) {
	dnat := func(chain, comment string) *ruleset.Rule {
		return &ruleset.Rule{Table: "nat", Chain: chain, Target: "DNAT", Comment: comment}
	}
	jump := func(chain, target, comment string) *ruleset.Rule {
		return &ruleset.Rule{Table: "nat", Chain: chain, Target: target, Comment: comment}
	}
	for _, tc := range []struct {
		name string
		rule *ruleset.Rule
		via  []*ruleset.Rule
		want string
	}{
		{"a cluster IP, named port", dnat("KUBE-SEP-X", "shop/checkout:https"),
			[]*ruleset.Rule{jump("OUTPUT", "KUBE-SERVICES", "kubernetes service portals"), jump("KUBE-SERVICES", "KUBE-SVC-X", "shop/checkout:https cluster IP"), jump("KUBE-SVC-X", "KUBE-SEP-X", "shop/checkout:https -> 10.42.2.20:8443")},
			"Service shop/checkout:https, cluster IP"},
		{"a load balancer IP, unnamed port", dnat("KUBE-SEP-Y", "default/ingress"),
			[]*ruleset.Rule{jump("KUBE-SERVICES", "KUBE-EXT-Y", "default/ingress loadbalancer IP"), jump("KUBE-EXT-Y", "KUBE-SVL-Y", "")},
			"Service default/ingress, load balancer IP"},
		{"an external IP", dnat("KUBE-SEP-Z", "default/web"),
			[]*ruleset.Rule{jump("KUBE-SERVICES", "KUBE-EXT-Z", "default/web external IP")}, "Service default/web, external IP"},
		{"a node port", dnat("KUBE-SEP-E", "default/echo"),
			[]*ruleset.Rule{jump("KUBE-SERVICES", "KUBE-NODEPORTS", "kubernetes service nodeports; NOTE: this must be the last rule in this chain"), jump("KUBE-NODEPORTS", "KUBE-EXT-E", "default/echo")},
			"Service default/echo, node port"},
		{"nftables mode: the endpoint's chain, through the Service's", dnat("endpoint-4QCEZ3CA-shop/checkout/tcp/https__10.42.2.20/8443", ""),
			[]*ruleset.Rule{jump("services", "service-ULMVA6XW-shop/checkout/tcp/https", ""), jump("service-ULMVA6XW-shop/checkout/tcp/https", "endpoint-4QCEZ3CA-shop/checkout/tcp/https__10.42.2.20/8443", "")},
			"Service shop/checkout:https"},
		{"nftables mode: an unnamed port, by a load balancer address", dnat("endpoint-AAAAAAAA-default/ingress/tcp/__10.244.1.20/443", ""),
			[]*ruleset.Rule{jump("services", "external-BBBBBBBB-default/ingress/tcp/", "")},
			"Service default/ingress, external or load balancer IP"},
		{"CNI portmap's hostPort DNAT is no Service's", dnat("CNI-DN-093e6edd5ba1d6052a1ee", `dnat name: "cbr0" id: "fb7cdb0a"`), nil, ""},
		{"a MASQUERADE is not a DNAT", &ruleset.Rule{Table: "nat", Chain: "KUBE-POSTROUTING", Target: "MASQUERADE", Comment: "default/web"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if s := serviceOfNAT(tc.rule, tc.via); s != nil {
				got = s.String()
			}
			if got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

// TestFindingsNameTheirService: a finding about a request DNATed by
// kube-proxy's rules names the Service beside the address it was sent to,
// and as Finding.Service; one DNATed by another rule (CNI's hostPort)
// names none. The Services the API lists name it where no rule does, and
// say how it was addressed where the rule does not.
func TestFindingsNameTheirService(t *testing.T) {
	web := service.Service{Namespace: "default", Name: "web", Port: "http", Address: service.ClusterIP}
	for _, tc := range []struct {
		name     string
		check    func(*flow.Flow, Context) *Finding
		events   []event.Event
		rulesets string // "": none known
		services []service.Frontend
		want     string // in the summary
		service  string
	}{
		{"snat-missing: a cluster IP", snatMissingOnTunnel, fixture.SNATMissing(false), "snat-missing-n1", nil,
			"SYN 172.20.0.1:40000 -> 10.96.0.10:80 (Service default/web, cluster IP) was DNATed", "Service default/web, cluster IP"},
		{"snat-missing: no ruleset known, the API names the cluster IP", snatMissingOnTunnel, fixture.SNATMissing(false), "",
			[]service.Frontend{{Protocol: 6, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Service: web}},
			"SYN 172.20.0.1:40000 -> 10.96.0.10:80 (Service default/web:http, cluster IP) was DNATed", "Service default/web:http, cluster IP"},
		{"snat-missing: the rule's Service over the API's, which may be behind", snatMissingOnTunnel, fixture.SNATMissing(false), "snat-missing-n1",
			[]service.Frontend{{Protocol: 6, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Service: service.Service{Namespace: "old", Name: "gone", Address: service.ClusterIP}}},
			"(Service default/web, cluster IP) was DNATed", "Service default/web, cluster IP"},
		{"snat-missing: a node port only at a node's address", snatMissingOnTunnel, fixture.SNATMissing(false), "",
			[]service.Frontend{{Protocol: 6, Port: 80, Service: service.Service{Namespace: "default", Name: "echo", Address: service.NodePort}}},
			"SYN 172.20.0.1:40000 -> 10.96.0.10:80 was DNATed", ""},
		{"hairpin: a load balancer IP", replyBypassedNAT, fixture.Hairpin(false), "hairpin-n1", nil,
			"the client called 172.20.0.100:443 (Service default/ingress, load balancer IP)", "Service default/ingress, load balancer IP"},
		{"hairpin in nftables mode: the chain names the Service, the API how it was addressed", replyBypassedNAT, fixture.Hairpin(false), "hairpin-nft-n1",
			[]service.Frontend{{Protocol: 6, Addr: netip.MustParseAddr("172.20.0.100"), Port: 443, Service: service.Service{Namespace: "default", Name: "ingress", Address: service.LoadBalancerIP}}},
			"the client called 172.20.0.100:443 (Service default/ingress, load balancer IP)", "Service default/ingress, load balancer IP"},
		{"stale hostPort: CNI's DNAT, no Service", dnatToDeadEndpoint, fixture.StaleHostPort(false), "stale-hostport-n1", nil,
			"SYN to 172.20.0.1:8443 was DNATed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flows := flowsOf(t, tc.events)
			if len(flows) != 1 {
				t.Fatalf("%d flows", len(flows))
			}
			n := fixture.Context{Services: service.NewTable(tc.services)}
			if tc.rulesets != "" {
				n.Rulesets = map[uint32]*ruleset.Ruleset{1: rules(t, tc.rulesets)}
			}
			fd := tc.check(flows[0], n)
			if fd == nil {
				t.Fatal("did not fire")
			}
			if !strings.Contains(fd.Summary, tc.want) {
				t.Errorf("summary lacks %q:\n%s", tc.want, fd.Summary)
			}
			got := ""
			if fd.Service != nil {
				got = fd.Service.String()
			}
			if got != tc.service {
				t.Errorf("Service %q, want %q", got, tc.service)
			}
		})
	}
}
