package explain

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// rules reads a ruleset of the lab's (pkg/ruleset/testdata).
func rules(t *testing.T, name string) *ruleset.Ruleset {
	t.Helper()
	rs, err := fixture.Ruleset(name)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

const filterRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A INPUT -d 10.0.0.2/32 -p tcp -m tcp --dport 9001 -m comment --comment "default/deny-9001" -j DROP
COMMIT
`

// TestFindingsNameTheirRule: given the namespace's ruleset, each finding
// names the rule behind the failure, in its summary, its evidence and
// Finding.NetfilterRules; without one, it names none.
func TestFindingsNameTheirRule(t *testing.T) {
	filter, err := ruleset.Parse(filterRules)
	if err != nil {
		t.Fatal(err)
	}
	n1 := func(name string) map[uint32]*ruleset.Ruleset { return map[uint32]*ruleset.Ruleset{1: rules(t, name)} }
	for _, tc := range []struct {
		name     string
		check    func(*flow.Flow, Context) *Finding
		events   []event.Event
		rulesets map[uint32]*ruleset.Ruleset
		summary  string
		named    []string // role: rule text, in order
	}{
		{
			"snat-missing: the stale RETURN before the MASQUERADE", snatMissingOnTunnel, fixture.SNATMissing(false), n1("snat-missing-n1"),
			`not SNATed in POSTROUTING (nat POSTROUTING rule 4 (RETURN, "flanneld masq") ended the chain before nat POSTROUTING rule 6 (MASQUERADE, "flanneld masq"))`,
			[]string{
				`decided: -A POSTROUTING ! -s 10.244.0.0/16 -d 10.244.2.0/24 -m comment --comment "flanneld masq" -j RETURN`,
				`skipped: -A POSTROUTING ! -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully`,
			},
		},
		{
			"snat-missing, flannel's own chain: its stale RETURN, entered from POSTROUTING, before its MASQUERADE", snatMissingOnTunnel, fixture.SNATMissing(false), n1("snat-missing-chain-n1"),
			`not SNATed in POSTROUTING (nat FLANNEL-POSTRTG rule 4 (RETURN, "flanneld masq"), entered from POSTROUTING, ended the chain before nat FLANNEL-POSTRTG rule 7 (MASQUERADE, "flanneld masq"))`,
			[]string{
				`decided: -A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.2.0/24 -m comment --comment "flanneld masq" -j RETURN`,
				`skipped: -A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully`,
			},
		},
		{
			"stale hostPort: the stale chain's DNAT, and the live one it shadows", dnatToDeadEndpoint, fixture.StaleHostPort(false), n1("stale-hostport-n1"),
			`DNATed to 10.244.1.36:443 (pod shop/ingress-old) in n1 PREROUTING (nat CNI-DN-093e6edd5ba1d6052a1ee rule 3 (DNAT, "dnat name: \"cbr0\" id: \"fb7cdb0a4f8da673da0a9818ec9a1576f953a8e8decf87a081827c11e4aa7138\"") decided; nat CNI-DN-deb6904d86bc61d55c4e6 rule 3 (DNAT, "dnat name: \"cbr0\" id: \"2e5c1a4f0b9d7c3e8a6f4d2b1c0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e\"") would have chosen 10.244.1.34:443)`,
			[]string{
				`decided: -A CNI-DN-093e6edd5ba1d6052a1ee -p tcp -m tcp --dport 8443 -j DNAT --to-destination 10.244.1.36:443`,
				`other: -A CNI-DN-deb6904d86bc61d55c4e6 -p tcp -m tcp --dport 8443 -j DNAT --to-destination 10.244.1.34:443`,
			},
		},
		{
			"hairpin: the load balancer's DNAT", replyBypassedNAT, fixture.Hairpin(false), n1("hairpin-n1"),
			`, which reset it; the DNAT: nat KUBE-SEP-K64J3NQ7WOFVDNR4 rule 2 (DNAT, "default/ingress").`,
			[]string{`decided: -A KUBE-SEP-K64J3NQ7WOFVDNR4 -p tcp -m comment --comment "default/ingress" -m tcp -j DNAT --to-destination 10.244.1.20:443`},
		},
		{
			"a DROP rule of the filter table", droppedByNetfilter, fixture.NetfilterDrop(), map[uint32]*ruleset.Ruleset{2: filter},
			`dropped by filter INPUT rule 2 (DROP, "default/deny-9001") in n2 INPUT.`,
			[]string{`decided: -A INPUT -d 10.0.0.2/32 -p tcp -m tcp --dport 9001 -m comment --comment "default/deny-9001" -j DROP`},
		},
		{
			"a DROP rule in a namespace without NAT hooks (the drop alone)", droppedByNetfilter, fixture.NetfilterDrop()[1:], map[uint32]*ruleset.Ruleset{2: filter},
			`dropped by filter INPUT rule 2 (DROP, "default/deny-9001") in n2 INPUT.`,
			[]string{`decided: -A INPUT -d 10.0.0.2/32 -p tcp -m tcp --dport 9001 -m comment --comment "default/deny-9001" -j DROP`},
		},
		{
			"kube-proxy's nftables mode: a Service without endpoints, rejected through its no-endpoint-services map", droppedByNetfilter,
			fixture.NoEndpoints(), n1("no-endpoints-nft-n1"),
			`SYN 10.98.5.1:40000 -> 10.96.0.50:80 (Service default/web:80) was dropped by kube-proxy reject-chain rule 1 (REJECT, "default/web:80") in n1 OUTPUT, ` +
				`reached by kube-proxy's no-endpoint-services element 10.96.0.50 . tcp . 80 comment "default/web:80" : goto reject-chain: the Service has no endpoints`,
			[]string{`decided: reject`},
		},
		{
			"no ruleset: no rule named", snatMissingOnTunnel, fixture.SNATMissing(false), nil,
			"and not SNATed in POSTROUTING: it left", nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flows := flowsOf(t, tc.events)
			if len(flows) != 1 {
				t.Fatalf("%d flows", len(flows))
			}
			fd := tc.check(flows[0], fixture.Context{Rulesets: tc.rulesets})
			if fd == nil {
				t.Fatal("did not fire")
			}
			if !strings.Contains(fd.Summary, tc.summary) {
				t.Errorf("summary lacks %q:\n%s", tc.summary, fd.Summary)
			}
			var named []string
			for _, r := range fd.NetfilterRules {
				named = append(named, r.Role+": "+r.Text)
				if r.Source != SourceRuleset {
					t.Errorf("source %q", r.Source)
				}
			}
			if strings.Join(named, "\n") != strings.Join(tc.named, "\n") {
				t.Errorf("named\n%s\nwant\n%s", strings.Join(named, "\n"), strings.Join(tc.named, "\n"))
			}
			for _, want := range tc.named {
				_, text, _ := strings.Cut(want, ": ")
				found := false
				for _, ev := range fd.Evidence {
					found = found || strings.Contains(ev.Fact, text)
				}
				if !found {
					t.Errorf("no evidence shows %s", text)
				}
			}
		})
	}
}

// TestPacketNATRules: each nat step of a connection's first packet gets
// the rules that decided it; a namespace without a ruleset, and a reply,
// get none.
func TestPacketNATRules(t *testing.T) {
	flows := flowsOf(t, fixture.SNATMissing(false))
	names := fixture.Context{Rulesets: map[uint32]*ruleset.Ruleset{1: rules(t, "snat-missing-n1")}}
	var got []string
	for _, p := range flows[0].Packets {
		for i, rs := range PacketNATRules(names, p) {
			for _, r := range rs {
				got = append(got, fmt.Sprintf("%s %s: %s %s %d", p.Events[i].Hook, r.Role, r.Table, r.Chain, r.Position))
			}
		}
	}
	want := []string{
		"OUTPUT decided: nat KUBE-SEP-SLU7GZY5SPD3QPRN 2",
		"POSTROUTING decided: nat POSTROUTING 4",
		"POSTROUTING skipped: nat POSTROUTING 6",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("named\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFindingsNameTracedRules: a rule the kernel traced the packet
// through is named as traced, confirming the ruleset's attribution or
// overruling it; steps of another packet (a later one with the same tuple)
// are not taken.
func TestFindingsNameTracedRules(t *testing.T) {
	filter, err := ruleset.Parse(filterRules)
	if err != nil {
		t.Fatal(err)
	}
	events := fixture.NetfilterDrop()
	drop := events[len(events)-1]
	step := func(chain string, position int, verdict string, after uint64) ruleset.Trace {
		return ruleset.Trace{Netns: drop.Netns, Time: drop.Time + after, ID: 7, Hook: "INPUT", Kind: ruleset.TraceRule,
			Table: "filter", Chain: chain, Handle: 40 + uint64(position), Position: position, Verdict: verdict,
			Packet: ruleset.Packet{Src: drop.Tuple.Src, Dst: drop.Tuple.Dst, Proto: drop.Tuple.Proto, Sport: drop.Tuple.Sport, Dport: drop.Tuple.Dport}}
	}
	policy := step("INPUT", 0, "drop", 50_000)
	policy.Kind, policy.Handle = ruleset.TracePolicy, 0
	for _, tc := range []struct {
		name   string
		steps  []ruleset.Trace
		source string
		named  string
		handle uint64
	}{
		{"traced through the rule the ruleset names", []ruleset.Trace{step("INPUT", 2, "drop", 50_000)}, SourceTraced,
			`-A INPUT -d 10.0.0.2/32 -p tcp -m tcp --dport 9001 -m comment --comment "default/deny-9001" -j DROP`, 42},
		{"traced to the chain's policy, which the ruleset does not say", []ruleset.Trace{policy}, SourceTraced, "", 0},
		{"a trace of a packet seconds later", []ruleset.Trace{step("INPUT", 2, "drop", 10_000_000_000)}, SourceRuleset,
			`-A INPUT -d 10.0.0.2/32 -p tcp -m tcp --dport 9001 -m comment --comment "default/deny-9001" -j DROP`, 0},
		{"no trace", nil, SourceRuleset,
			`-A INPUT -d 10.0.0.2/32 -p tcp -m tcp --dport 9001 -m comment --comment "default/deny-9001" -j DROP`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var traces ruleset.Traces
			for _, s := range tc.steps {
				traces.Add(s)
			}
			flows := flowsOf(t, events)
			fd := droppedByNetfilter(flows[0], fixture.Context{Rulesets: map[uint32]*ruleset.Ruleset{2: filter}, Traces: &traces})
			if fd == nil || len(fd.NetfilterRules) != 1 {
				t.Fatalf("finding %+v", fd)
			}
			r := fd.NetfilterRules[0]
			if r.Source != tc.source || r.Text != tc.named || r.Handle != tc.handle {
				t.Errorf("named %s %q (handle %d), want %s %q (handle %d)", r.Source, r.Text, r.Handle, tc.source, tc.named, tc.handle)
			}
		})
	}
}
