package explain

import (
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
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
