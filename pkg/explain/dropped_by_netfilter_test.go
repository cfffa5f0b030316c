package explain

import (
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// lateSYNACK is the NETFILTER_DROP incident's packets turned around: a
// SYN-ACK alone, dropped by a rule.
func lateSYNACK(t *testing.T) []event.Event {
	t.Helper()
	var out []event.Event
	for _, e := range fixture.NetfilterDrop() {
		for _, t := range []*event.Tuple{&e.Tuple, &e.NAT.Pre} {
			*t = t.Reverse()
			t.TCPFlags = fixture.SYNACK
		}
		out = append(out, e)
	}
	return out
}

func TestDroppedByNetfilter(t *testing.T) {
	withICMP := fixture.SNATMissing(true)
	redirect := withICMP[1]
	redirect.Point, redirect.Kind, redirect.Flags = event.PointDrop, event.KindDrop, event.FlagCT
	redirect.Tuple.Proto = event.ProtoICMP
	redirect.Drop.Reason = fixture.Reason("NETFILTER_DROP")
	redirect.Skb = 0x999
	runRule(t, droppedByNetfilter, []ruleCase{
		{"INPUT DROP rule", fixture.NetfilterDrop(), true, []string{"SYN 10.0.0.1:40001 -> 10.0.0.2:9001",
			"netfilter DROP verdict in n2", "after PREROUTING: in the INPUT or FORWARD filter chains"}},
		{"related ICMP dropped", append(withICMP, redirect), false, nil},
		{"no drop", fixture.SNATMissing(true), false, nil},
		// A SYN-ACK retransmitted after its connection's flow ended (the
		// client gave up) and dropped again: told by the first flow.
		{"a late SYN-ACK alone", lateSYNACK(t), false, nil},
	})
}

// TestKubeProxyWhy: a rule kube-proxy's nftables mode reached through an
// element of one of its verdict maps says why from the map's name; any
// other rule says nothing.
func TestKubeProxyWhy(t *testing.T) {
	const element = `, element 10.96.0.50 . tcp . 80 comment "default/web:80" : goto reject-chain`
	for _, tc := range []struct {
		via  string
		want string
	}{
		{"ip daddr . meta l4proto . th dport vmap @no-endpoint-services" + element, "the Service has no endpoints"},
		{"ip daddr . meta l4proto . th dport vmap @firewall-ips" + element, "not in the Service's loadBalancerSourceRanges"},
		{"ip daddr . meta l4proto . th dport vmap @service-ips" + element, ""},
		{"-A INPUT -j KUBE-FIREWALL", ""},
	} {
		got := kubeProxyWhy(NetfilterRule{Via: []string{tc.via}})
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.via, got, tc.want)
		}
		if tc.want != "" && !strings.Contains(got, "10.96.0.50 . tcp . 80") {
			t.Errorf("%s: %q names no element", tc.via, got)
		}
	}
}

// TestKubeProxyWhyIptables: kube-proxy's iptables mode says why in the
// comment of its DROP or REJECT, after the Service, which the rule is
// then for; a comment that is not kube-proxy's says nothing.
func TestKubeProxyWhyIptables(t *testing.T) {
	for _, tc := range []struct {
		comment, service, want string
	}{
		{"shop/web:https traffic not accepted by KUBE-FW-JB5AVGRZAOG6S5T3", "shop/web:https", "not in the Service's loadBalancerSourceRanges"},
		{"shop/web:https has no endpoints", "shop/web:https", "the Service has no endpoints"},
		{"shop/web has no local endpoints", "shop/web", "externalTrafficPolicy is Local"},
		{"block incoming localnet connections", "", ""},
		{"shop/web:https cluster IP", "", ""},
	} {
		if got := kubeProxyWhy(NetfilterRule{Comment: tc.comment}); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.comment, got, tc.want)
		}
		got := ""
		if s := serviceOfDrop(&ruleset.Rule{Target: "DROP", Comment: tc.comment}, nil); s != nil {
			got = s.String()
		}
		if want := tc.service; want != "" && !strings.Contains(got, want) || want == "" && got != "" {
			t.Errorf("%s: Service %q, want %q", tc.comment, got, want)
		}
	}
}
