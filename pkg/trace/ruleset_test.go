package trace

import (
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

func natRules(masquerade string) string {
	return "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -s 10.244.0.0/16 -j " + masquerade + "\nCOMMIT\n"
}

// ip6NatRules is an ip6tables ruleset.
const ip6NatRules = "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -d fd00:96::10/128 -p tcp -j DNAT --to-destination [fd00:10:244:2::10]:8080\nCOMMIT\n"

// nativeKubeProxy is part of kube-proxy's nftables table as nft -a -s
// lists it.
const nativeKubeProxy = `table ip kube-proxy { # handle 5
	comment "rules for kube-proxy"
	chain masquerading { # handle 7
		meta mark & 0x00004000 == 0x00000000 return # handle 8
		masquerade fully-random # handle 9
	}
}
`

// TestRulesetsReplayAsTheyStood: a recording carries each namespace's
// rulesets (iptables', ip6tables' and native tables) and their changes;
// replay finds the one in force at a time, in one recording and across
// several.
func TestRulesetsReplayAsTheyStood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.ntrace")
	meta := Meta{Nettrace: "test", WallNS: 1_000_000_000_000, MonoNS: 1_000}
	w, err := Create(path, meta, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	big := natRules("MASQUERADE") + strings.Repeat("# a large cluster's ruleset\n", 200_000)
	for _, s := range []ruleset.Snapshot{
		ruleset.NewSnapshot(1, 1_000, natRules("MASQUERADE"), "", ""),
		ruleset.NewSnapshot(1, 5_000, natRules("RETURN"), ip6NatRules, nativeKubeProxy),
		ruleset.NewSnapshot(2, 1_000, big, "", ""),
	} {
		if err := w.Ruleset(s); err != nil {
			t.Fatal(err)
		}
	}
	step := ruleset.Trace{Netns: 1, Time: 6_000, ID: 9, Hook: "POSTROUTING", Kind: ruleset.TraceRule, Table: "nat", Chain: "POSTROUTING",
		Handle: 77, Position: 1, Verdict: "return", Packet: ruleset.Packet{Src: netip.MustParseAddr("10.0.0.1"),
			Dst: netip.MustParseAddr("10.244.2.10"), Proto: 6, Sport: 40000, Dport: 8080, Mark: ruleset.Mark{Value: 1, Known: 3}}}
	if err := w.RuleTrace(&step); err != nil {
		t.Fatal(err)
	}
	evs := incident()
	for i := range evs {
		if err := w.Event(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(Summary{}); err != nil {
		t.Fatal(err)
	}
	target := func(rs *ruleset.Ruleset) string {
		if rs == nil {
			return "none"
		}
		return rs.Tables["nat"].Chains["POSTROUTING"].Rules[0].Target
	}

	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := readAll(r); err != io.EOF {
		t.Fatal(err)
	}
	if got := r.RuleTraces.Pass(1, "POSTROUTING", step.Packet, 5_500); len(got) != 1 || got[0] != step {
		t.Errorf("rule trace read back: %+v, want %+v", got, step)
	}
	if got := target(r.Rulesets.At(1, 5_000).IPv6); got != "DNAT" {
		t.Errorf("ip6tables ruleset read back: %s, want its DNAT", got)
	}
	if got := target(r.Rulesets.At(1, 1_000).IPv6); got != "none" {
		t.Errorf("ip6tables ruleset where none was read: %s", got)
	}
	if rule := r.Rulesets.At(1, 5_000).Native.Rule("kube-proxy", "masquerading", 9); rule == nil || rule.Position != 2 || rule.Target != "MASQUERADE" {
		t.Errorf("native rule read back: %+v", rule)
	}
	for _, tc := range []struct {
		netns uint32
		at    uint64
		want  string
	}{{1, 500, "MASQUERADE"}, {1, 4_999, "MASQUERADE"}, {1, 5_000, "RETURN"}, {1, 1 << 40, "RETURN"}, {2, 0, "MASQUERADE"}, {3, 0, "none"}} {
		if got := target(r.Rulesets.At(tc.netns, tc.at)); got != tc.want {
			t.Errorf("netns %d at %d: %s, want %s", tc.netns, tc.at, got, tc.want)
		}
	}

	// Two recordings: namespaces are the stream's own, times wall-clock.
	r1, _ := Open(path)
	r2, _ := Open(record(t, incident(), true))
	defer r1.Close()
	defer r2.Close()
	s := NewStream([]*Reader{r1, r2})
	var e event.Event
	var ns uint32
	for s.Next(&e) == nil {
		if s.readers[s.taken] == r1 && e.Netns != 0 && s.unmapNs[e.Netns][1] == 1 {
			ns = e.Netns
		}
	}
	if ns == 0 {
		t.Fatal("no event of namespace 1 in the stream")
	}
	at := func(mono uint64) uint64 { return uint64(meta.Wall(mono).UnixNano()) }
	if got := target(s.Ruleset(ns, at(4_999))); got != "MASQUERADE" {
		t.Errorf("stream, before the change: %s", got)
	}
	if got := target(s.Ruleset(ns, at(6_000))); got != "RETURN" {
		t.Errorf("stream, after the change: %s", got)
	}
}

// A recording whose rulesets inflate past what a recording may make
// nettrace hold (four records of 40 MiB each, a few hundred kilobytes on
// disk) is read up to the record that passes it: the error names that
// record and the budget, and the events before it were read.
func TestRulesetsPastTheBudgetEndTheRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bomb.ntrace")
	w, err := Create(path, Meta{Nettrace: "test"}, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("-A KUBE-SERVICES -j RETURN\n", MaxHeld*5/8/27)
	var e event.Event
	for i := range 4 {
		e = fixture.SNATMissing(false)[0]
		if err := w.Event(&e); err != nil {
			t.Fatal(err)
		}
		if err := w.Ruleset(ruleset.Snapshot{Netns: uint32(i + 1), Time: uint64(i), Text: big}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(Summary{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	events := 0
	for err = r.Next(&e); err == nil; err = r.Next(&e) {
		events++
	}
	var te *Error
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "ruleset record: it would pass the 64 MiB") || events != 2 {
		t.Fatalf("read %d events, then %v; want 2, then the second ruleset record refused (the first took half the budget)", events, err)
	}
	if r.held > MaxHeld {
		t.Fatalf("the reader holds %d bytes, over the budget's %d", r.held, MaxHeld)
	}
}
