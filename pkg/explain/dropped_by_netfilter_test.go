package explain

import (
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
