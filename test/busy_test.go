package test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// Every incident and its healthy twin beside the lab's background traffic
// (short TCP connections reusing source ports, a Service, UDP, ICMP,
// multicast and broadcast), watched as a user would on a busy node: with
// the incident's filter, and with no filter on every namespace. Each run
// must name exactly the incident's fault on the faulty connection's flow,
// with its rule (traced when filtered, from the ruleset when not), nothing
// on the healthy twin, and (unfiltered) one flow per background
// connection, none holding two.
func TestBusyLab(t *testing.T) {
	eachScenario(t, func(t *testing.T, c scenarioCheck, name string, healthy bool) {
		for _, mode := range []struct {
			name, filter string
			all          bool
		}{{"filtered", c.filter, false}, {"unfiltered", "", true}} {
			t.Run(mode.name, func(t *testing.T) {
				// Unfiltered, every background packet is reported: a ring
				// buffer that holds the whole run, so that a slow machine
				// (the TCG guest) loses nothing while user space catches up.
				// Filtered, the rules are traced (--rules); unfiltered they
				// are attributed from the rulesets.
				args := []string{"--rules"}
				if mode.all {
					args = []string{"--ring-size", "67108864"}
				}
				r := runLab(t, name, mode.filter, runOptions{noise: true, allNetns: mode.all}, args...)
				c.check(t, r.inLab(t).withoutTrueFaults(t), healthy)
				if mode.all {
					r.requireNoiseFlows(t)
					r.requireQueriesLabelled(t)
				}
			})
		}
	})
}

// inLab keeps the explanations of flows that crossed a lab namespace: with
// --netns all the host's own traffic is watched too, and is not the
// test's to judge.
func (r labRun) inLab(t *testing.T) labRun {
	inLab := map[uint64]bool{}
	for _, f := range r.flows {
		for _, p := range f.Packets {
			for _, s := range p.Steps {
				if lab.IsLabNetns(s.Netns) {
					inLab[f.ID] = true
				}
			}
		}
	}
	var xs []output.JSONExplanation
	for _, x := range r.explanations {
		if inLab[x.Flow.ID] {
			xs = append(xs, x)
		} else {
			t.Logf("outside the lab, not judged: %s: %s", x.Rule, x.Summary)
		}
	}
	r.explanations = xs
	return r
}

// withoutTrueFaults sets aside the findings on background flows that the
// kernel or the background's own clients confirm: connections reusing a
// port race their own packets, and the kernel drops the loser of such a
// race for real. A conntrack-clash finding is set aside where its
// namespace's insert_failed counter counted one, and takes that one from
// the count the scenario's own check reads; any other finding on a
// background flow only for a connection the background's client saw fail
// (one finding per failure). Those findings are true and not the
// scenario's; any other finding stays, and fails the run.
func (r labRun) withoutTrueFaults(t *testing.T) labRun {
	failed := map[string]int{}
	if r.noise != nil {
		maps.Copy(failed, r.noise.Failed)
	}
	var xs []output.JSONExplanation
	for _, x := range r.explanations {
		if background(x.Flow.Tuple) {
			if x.Rule == "conntrack-clash" && len(x.Evidence) > 0 {
				// The last evidence is the drop, in the clash's namespace.
				ns := x.Evidence[len(x.Evidence)-1].Netns
				if n := r.insertFailed[ns]; n > 0 {
					// That insert failure is this flow's: the scenario's
					// check must not take it for its own.
					r.insertFailed[ns]--
					t.Logf("a true conntrack clash (%s counted %d insert failures), not the scenario's: %s", ns, n, x.Summary)
					continue
				}
			}
			if target := fmt.Sprintf("%s:%d", x.Flow.Tuple.Dst, x.Flow.Tuple.Dport); failed[target] > 0 {
				failed[target]--
				t.Logf("a background connection to %s that failed for its client too, not the scenario's: %s: %s", target, x.Rule, x.Summary)
				continue
			}
		}
		xs = append(xs, x)
	}
	r.explanations = xs
	return r
}

// background says whether a flow is the background traffic's: every
// background connection has the noise pod at one end.
func background(t *output.JSONTuple) bool {
	if t == nil {
		return false
	}
	for _, f := range []lab.Family{lab.IPv4, lab.IPv6} {
		if t.Src == f.NoisePod || t.Dst == f.NoisePod {
			return true
		}
	}
	return false
}

// requireNoiseFlows checks the background connections against their
// flows: as many TCP flows on the noise port as connections made, each
// holding one connection (one client port).
func (r labRun) requireNoiseFlows(t *testing.T) {
	t.Helper()
	if r.noise == nil || r.noise.TCPConns == 0 {
		t.Fatalf("no background connections were made: %v", r.noise)
	}
	if lost := lostEvents(r.summary); lost > 0 {
		t.Fatalf("%.0f events lost: the flows cannot be compared with the connections", lost)
	}
	flows := 0
	flowsOf := map[string][]output.JSONFlow{}
	for _, f := range r.flows {
		clients := noiseClients(f)
		if len(clients) == 0 {
			continue
		}
		flows++
		if len(clients) > 1 {
			t.Errorf("flow %d holds packets of %d connections (%v); its flow:\n%s", f.ID, len(clients), clients, dump([]output.JSONFlow{f}))
		}
		for c := range clients {
			flowsOf[c] = append(flowsOf[c], f)
		}
	}
	if flows != r.noise.TCPConns {
		t.Errorf("%d TCP flows on port %d for %d background connections (%s); the tuples in several flows, whose flows hold one connection each unless it was dialed again from the same port:\n%s\nthe events of the flows that begin with no SYN and of the flows before them, at their packets' skbs:\n%s",
			flows, lab.NoisePort, r.noise.TCPConns, r.noise, strings.Join(sharedTuples(flowsOf), "\n"), dump(splitEvents(flowsOf, r.events)))
	}
}

// noiseClients lists the background connections a flow holds packets of,
// as the client sees them, in its namespace (NAT on the node may change
// the source port).
func noiseClients(f output.JSONFlow) map[string]bool {
	clients := map[string]bool{}
	for _, p := range f.Packets {
		for _, s := range p.Steps {
			t := s.Tuple
			if s.Netns != lab.NetnsName("q1") || t == nil || t.Proto != "tcp" {
				continue
			}
			switch uint16(lab.NoisePort) {
			case t.Dport:
				clients[fmt.Sprintf("%s:%d -> %s", t.Src, t.Sport, t.Dst)] = true
			case t.Sport:
				clients[fmt.Sprintf("%s:%d -> %s", t.Dst, t.Dport, t.Src)] = true
			}
		}
	}
	return clients
}

// sharedTuples describes each client tuple found in more than one flow:
// its flows in order, each with its packets as the client's namespace
// saw them (label, direction, time), so that a split connection shows
// where it split.
func sharedTuples(flowsOf map[string][]output.JSONFlow) []string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(flowsOf)) {
		fs := flowsOf[c]
		if len(fs) < 2 {
			continue
		}
		out = append(out, c+":")
		for _, f := range fs {
			var pkts []string
			for _, p := range f.Packets {
				if len(p.Steps) == 0 {
					continue
				}
				pkts = append(pkts, fmt.Sprintf("%s %s +%.0fms (%d steps, first in %s, %s)",
					p.Direction, p.Label, f.Start.Add(time.Duration(p.Steps[0].OffsetUS*1e3)).Sub(fs[0].Start).Seconds()*1e3,
					len(p.Steps), p.Steps[0].Netns, p.End))
			}
			out = append(out, fmt.Sprintf("  flow %d, %d packets: %s", f.ID, len(f.Packets), strings.Join(pkts, "; ")))
		}
	}
	return out
}

// splitEvents returns the events that show why a connection split: those
// of the packets of each flow on a shared tuple that begins with no SYN
// (a part split off) and of the flow before it, at the packets' skbs while
// the two flows lasted. The skbs' other events are other packets': the
// kernel recycles its addresses.
func splitEvents(flowsOf map[string][]output.JSONFlow, events []output.JSONEvent) []output.JSONEvent {
	type span struct{ from, to time.Time }
	spans := map[string][]span{}
	for _, fs := range flowsOf {
		for i := 1; i < len(fs); i++ {
			if len(fs[i].Packets) > 0 && fs[i].Packets[0].Label == "SYN" {
				continue
			}
			for _, f := range fs[i-1 : i+1] {
				s := span{f.Start, f.Start.Add(time.Duration(f.DurationMS * 1e6))}
				for _, p := range f.Packets {
					spans[p.Skb] = append(spans[p.Skb], s)
				}
			}
		}
	}
	return find(events, func(e output.JSONEvent) bool {
		return slices.ContainsFunc(spans[e.Skb], func(s span) bool { return !e.Time.Before(s.from) && !e.Time.After(s.to) })
	})
}

// mldQuery is ICMPv6's type of an MLD query, which the JSON tuple holds
// in the high byte of its source port.
const mldQuery = 130

// requireQueriesLabelled checks the MLD queries of node 1's bridge, whose
// querier the background restarts: they were seen, and each one dropped
// (by the IPv6 snat-missing scenario's reverse-path filter: the query
// comes back to the bridge's own host from one of its addresses) is
// labelled as group management, not left to read as a fault; the
// scenario's check already fails on any finding it makes.
func (r labRun) requireQueriesLabelled(t *testing.T) {
	t.Helper()
	seen := 0
	for _, f := range r.flows {
		for _, p := range f.Packets {
			if p.Tuple == nil || p.Tuple.Proto != "icmp6" || p.Tuple.Sport>>8 != mldQuery || !slices.ContainsFunc(p.Steps, func(s output.JSONStep) bool {
				return s.Netns == lab.NsNode1
			}) {
				continue
			}
			seen++
			if strings.HasPrefix(p.End, "dropped") && !strings.HasPrefix(p.Ordinary, "MLD query: multicast group management") {
				t.Errorf("MLD query %s -> %s %s, not labelled as group management (ordinary %q)", p.Tuple.Src, p.Tuple.Dst, p.End, p.Ordinary)
			}
		}
	}
	if seen == 0 {
		t.Errorf("no MLD query of node 1's bridge seen, though its querier restarted %d times (%s)", r.noise.QuerierRestarts, r.noise)
	}
}

func lostEvents(summary map[string]any) float64 { return countsOf(summary, "lost") }

// Records lost for real never become a finding. A ring buffer of 64 KiB
// under ten times the busy lab's connection rate, unfiltered, loses and
// sheds records: the flows open meanwhile are marked incomplete, none of
// them gets a finding resting on what it lacks, and incident 1's fault is
// still named from what it shows (its reply's reverse-path drop), while
// its healthy twin gets none. Replay marks the same flows (runLab compares
// it with the live run).
//
// The fault's client starts with the noise and waits 5 s: its kernel sends
// the SYN at once, again 1 s later and 3 s later, the last one after the
// noise's 2 s. Whatever the loss took of the first two, the last is seen
// whole, and no gap between them reaches a flow's idle time (5 s), so the
// connection stays one flow: named once, by what the loss left. (With the
// scenario's 3 s, both SYNs could fall where the ring was full, and nothing
// of the fault was left to name.)
func TestForcedLoss(t *testing.T) {
	heavy := lab.NoiseConfig{Duration: 2 * time.Second, MaxConns: 4000, Workers: 8}
	twins(t, "snat-missing", func(t *testing.T, name string, healthy bool) {
		o := runOptions{noise: true, allNetns: true, noiseConfig: &heavy, clientTimeout: 5 * time.Second}
		r := runLab(t, name, "", o, "--ring-size", "65536")
		undelivered := lostEvents(r.summary) + countsOf(r.summary, "shed")
		incomplete, _ := r.summary["flows_incomplete"].(float64)
		t.Logf("%.0f records lost or shed, %.0f flows incomplete", undelivered, incomplete)
		if undelivered == 0 {
			t.Fatalf("nothing lost: the test forced no loss (summary %v)", r.summary)
		}
		if incomplete == 0 {
			t.Errorf("%.0f records lost or shed, no flow marked incomplete", undelivered)
		}
		marked := 0
		for _, f := range r.flows {
			if f.Incomplete {
				marked++
			}
		}
		if float64(marked) != incomplete {
			t.Errorf("%d flows say they are incomplete, the summary counts %.0f", marked, incomplete)
		}
		r = r.inLab(t).withoutTrueFaults(t)
		if healthy {
			r.healthy(t)
			return
		}
		xs := r.explained(t, "snat-missing-on-tunnel", "not SNATed", "came back on eth0")
		if len(xs) != 1 {
			t.Errorf("the fault named %d times, want once", len(xs))
		}
	})
}

func countsOf(summary map[string]any, key string) float64 {
	m, _ := summary[key].(map[string]any)
	n := 0.0
	for _, v := range m {
		f, _ := v.(float64)
		n += f
	}
	return n
}
