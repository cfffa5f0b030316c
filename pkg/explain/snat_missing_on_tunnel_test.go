package explain

import (
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

func TestSNATMissingOnTunnel(t *testing.T) {
	runRule(t, snatMissingOnTunnel, []ruleCase{
		{"incident 1", fixture.SNATMissing(false), true, []string{"DNATed to 10.244.2.10:8080 (pod default/web-2) in n1 OUTPUT",
			"routed out of flannel.1 (VNI 1, remote VTEP 172.20.0.2)", "not SNATed", "source 172.20.0.1",
			"came back on eth0", "rp_filter (IP_RPFILTER)", "never un-DNATed"}},
		{"incident 1 without the reply", synAgain(fixture.SNATMissing(false)[:9]), true, []string{"no reply came back through the tunnel"}},
		{"healthy: SNATed to the tunnel address", fixture.SNATMissing(true), false, nil},
		{"SNATed, reply not seen (yet)", fixture.SNATMissing(true)[:9], false, nil},
		{"DNAT without a tunnel", fixture.SYNOverflow(true), false, nil},
	})
}

// Where the reverse-path filter is a rule (IPv6 has no rp_filter: its
// filter is ip6tables' rpfilter match), the finding names the rule.
func TestSNATMissingOnTunnelNamesTheFilterRule(t *testing.T) {
	// The rule drops the reply in raw PREROUTING, before conntrack and
	// the nat hook see it.
	var evs []event.Event
	for _, e := range fixture.SNATMissing(false) {
		if e.Point == event.PointDrop {
			e.Drop.Reason = fixture.Reason("NETFILTER_DROP")
		}
		if e.Point != event.PointNAT || e.Hook != event.HookPrerouting {
			evs = append(evs, e)
		}
	}
	rs, err := ruleset.Parse("*raw\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -m rpfilter --invert -m comment --comment rpfilter -j DROP\nCOMMIT\n")
	if err != nil {
		t.Fatal(err)
	}
	flows := flowsOf(t, evs)
	fd := snatMissingOnTunnel(flows[0], fixture.Context{Rulesets: map[uint32]*ruleset.Ruleset{1: rs}})
	if fd == nil {
		t.Fatal("no finding")
	}
	const want = `came back on eth0 and was dropped by raw PREROUTING rule 1 (DROP, "rpfilter") (NETFILTER_DROP)`
	if !strings.Contains(fd.Summary, want) {
		t.Errorf("summary lacks %q: %s", want, fd.Summary)
	}
	if len(fd.NetfilterRules) == 0 || fd.NetfilterRules[len(fd.NetfilterRules)-1].Table != "raw" {
		t.Errorf("the filter rule is not among the finding's rules: %+v", fd.NetfilterRules)
	}
}

// synAgain adds the SYN sent again a second later: what a connection with
// no reply shows, and what ships it past the kernel gate.
func synAgain(evs []event.Event) []event.Event {
	again := evs[1]
	again.Skb, again.Time = again.Skb+0x1000, again.Time+1_000_000_000
	return append(evs, again)
}
