package ruleset

import (
	"net/netip"
	"slices"
	"testing"
)

const tracedRules = `*nat
:POSTROUTING ACCEPT [0:0]
:KUBE-POSTROUTING - [0:0]
-A POSTROUTING -j KUBE-POSTROUTING
-A POSTROUTING -d 10.244.2.0/24 -j RETURN
-A POSTROUTING -d 10.244.0.0/16 -j MASQUERADE
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
-A INPUT -p tcp --dport 9001 -j DROP
COMMIT
`

// TestTraced: the rule a trace decides by, for each way a hook's
// evaluation can end.
func TestTraced(t *testing.T) {
	rs, err := Parse(tracedRules)
	if err != nil {
		t.Fatal(err)
	}
	p := Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.244.2.10"), Proto: 6, Sport: 40000, Dport: 80}
	step := func(hook, table, chain string, pos int, verdict string) Trace {
		return Trace{Hook: hook, Table: table, Chain: chain, Position: pos, Handle: uint64(pos) + 10, Verdict: verdict, Kind: TraceRule, Packet: p}
	}
	policy := func(hook, table, verdict string) Trace {
		return Trace{Hook: hook, Table: table, Chain: hook, Verdict: verdict, Kind: TracePolicy, Packet: p}
	}
	for _, tc := range []struct {
		name         string
		table, hook  string
		steps        []Trace
		rule, policy string // the decided rule's text, or the policy
		via          int
	}{
		{"the last RETURN that skipped a MASQUERADE", "nat", "POSTROUTING", []Trace{
			step("POSTROUTING", "nat", "POSTROUTING", 1, "jump KUBE-POSTROUTING"),
			step("POSTROUTING", "nat", "KUBE-POSTROUTING", 1, "return"),
			step("POSTROUTING", "nat", "POSTROUTING", 2, "return"),
			policy("POSTROUTING", "nat", "accept"),
		}, "-A POSTROUTING -d 10.244.2.0/24 -j RETURN", "", 0},
		{"a NAT rule reached through a jump", "nat", "POSTROUTING", []Trace{
			step("POSTROUTING", "nat", "POSTROUTING", 1, "jump KUBE-POSTROUTING"),
			step("POSTROUTING", "nat", "KUBE-POSTROUTING", 2, "accept"),
		}, "-A KUBE-POSTROUTING -j MASQUERADE", "", 1},
		{"a DROP", "filter", "INPUT", []Trace{step("INPUT", "filter", "INPUT", 1, "drop")}, "-A INPUT -p tcp --dport 9001 -j DROP", "", 0},
		{"a policy DROP", "filter", "FORWARD", []Trace{policy("FORWARD", "filter", "drop")}, "", "DROP", 0},
		{"steps of another hook are not this one's", "filter", "INPUT", []Trace{policy("FORWARD", "filter", "drop")}, "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := rs.Traced(tc.table, tc.hook, tc.steps)
			if tc.rule == "" && tc.policy == "" {
				if a != nil {
					t.Fatalf("attributed %+v", a)
				}
				return
			}
			if a == nil {
				t.Fatal("no attribution")
			}
			got := ""
			if a.Rule != nil {
				got = a.Rule.Text
			}
			if got != tc.rule || a.Policy != tc.policy || len(a.Via) != tc.via {
				t.Errorf("rule %q policy %q via %d, want %q %q %d", got, a.Policy, len(a.Via), tc.rule, tc.policy, tc.via)
			}
			if !a.TracedIn(tc.steps) {
				t.Error("the trace does not go through its own attribution")
			}
		})
	}
}

// TestTracesPass: a packet's steps are told from those of a later packet
// with the same tuple, and from those read too long after it; a drop is
// attributed to the packet of the tuple that was dropped, not to the first.
func TestTracesPass(t *testing.T) {
	p := Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, Sport: 5000, Dport: 53}
	var ts Traces
	for _, s := range []Trace{
		{Netns: 1, Time: 1_000_100, ID: 1, Hook: "OUTPUT", Table: "filter", Chain: "OUTPUT", Position: 1, Kind: TraceRule, Packet: p, Verdict: "continue"},
		{Netns: 1, Time: 1_000_200, ID: 1, Hook: "OUTPUT", Table: "filter", Chain: "OUTPUT", Position: 2, Kind: TraceRule, Packet: p, Verdict: "accept"},
		{Netns: 1, Time: 900_000_000, ID: 2, Hook: "OUTPUT", Table: "filter", Chain: "OUTPUT", Position: 3, Kind: TraceRule, Packet: p, Verdict: "drop"},
		{Netns: 2, Time: 1_000_100, ID: 3, Hook: "OUTPUT", Packet: p, Verdict: "drop"},
	} {
		ts.Add(s)
	}
	for _, tc := range []struct {
		at         uint64
		ids, first []uint32
		hook       string
	}{
		{1_000_000, []uint32{1, 1, 2}, []uint32{1, 1}, "OUTPUT"},
		{899_999_000, []uint32{2}, []uint32{2}, "OUTPUT"},
		{1_000_000, nil, nil, "INPUT"},
		{10_000_000_000, nil, nil, "OUTPUT"},
	} {
		steps := ts.Pass(1, tc.hook, p, tc.at)
		if ids := traceIDs(steps); !slices.Equal(ids, tc.ids) {
			t.Errorf("at %d %s: ids %v, want %v", tc.at, tc.hook, ids, tc.ids)
		}
		if first := traceIDs(FirstPass(steps)); !slices.Equal(first, tc.first) {
			t.Errorf("at %d %s: first pass %v, want %v", tc.at, tc.hook, first, tc.first)
		}
	}
	var rs *Ruleset
	if a := rs.TracedDrop("OUTPUT", ts.Pass(1, "OUTPUT", p, 1_000_000)); a == nil || a.Rule.Position != 3 {
		t.Errorf("drop attributed to %+v, want the second packet's rule 3", a)
	}
}

func traceIDs(steps []Trace) []uint32 {
	var ids []uint32
	for _, s := range steps {
		ids = append(ids, s.ID)
	}
	return ids
}
