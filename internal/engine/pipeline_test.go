package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// incidentStream is the five incidents and their healthy twins repeated
// as distinct connections 50 ms apart: flows end while later ones are
// still being correlated.
func incidentStream(conns int) []event.Event {
	var seqs [][]event.Event
	for _, healthy := range []bool{false, true} {
		seqs = append(seqs, fixture.SNATMissing(healthy), fixture.SYNOverflow(healthy), fixture.StaleHostPort(healthy), fixture.Hairpin(healthy))
	}
	var out []event.Event
	for c := 0; c < conns; c++ {
		for _, seq := range seqs {
			for _, e := range seq {
				fixture.Repeat(&e, c, 50_000_000)
				out = append(out, e)
			}
		}
	}
	return out
}

// TestPipelineShowsFlowsAsInPlace: flows explained and shown on goroutines
// of their own come out in the order the correlator ended them, as
// explaining and showing each in place would write them. Run with -race,
// it also checks the hand-over between the goroutines.
func TestPipelineShowsFlowsAsInPlace(t *testing.T) {
	// 400 rounds 50 ms apart: 20 s, most of it past the flows' idle time.
	events := incidentStream(400)
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	const tickEvery = 64

	var want bytes.Buffer
	text := output.NewText(&want, names)
	text.Timelines = output.TimelinesAll
	c := flow.New(flow.DefaultConfig)
	wantFindings := map[string]uint64{}
	show := func(f *flow.Flow) {
		if len(f.Packets) == 0 {
			return
		}
		r := explain.NewReport(f, explain.Sources{Names: names}, text.Timelines.Detail())
		if r.Finding != nil {
			wantFindings[r.Finding.Rule]++
		}
		if err := text.Flow(f, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range events {
		c.Add(&events[i], show)
		if i%tickEvery == 0 {
			c.Expire(events[i].Time, show)
		}
	}
	endedBeforeFlush := c.Stats().Flows
	c.Flush(show)

	var got bytes.Buffer
	p := New(Options{Format: "text", Timelines: output.TimelinesAll, Names: names, Stdout: &got})
	if p.rendering == nil {
		t.Fatal("text flows without events are not shown on their own goroutines")
	}
	for i := range events {
		p.Event(&events[i])
		if i%tickEvery == 0 {
			p.Tick(events[i].Time)
		}
	}
	sum := p.Finish(nil, nil, 0)
	if p.err != nil {
		t.Fatal(p.err)
	}
	if endedBeforeFlush < 500 {
		t.Fatalf("only %d flows ended before the end of the run: the test shows little", endedBeforeFlush)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("pipeline wrote %d bytes, in place %d; first difference at byte %d", got.Len(), want.Len(), firstDiff(got.Bytes(), want.Bytes()))
	}
	for rule, n := range wantFindings {
		if sum.Findings[rule] != n {
			t.Errorf("%s: %d findings counted, %d found in place", rule, sum.Findings[rule], n)
		}
	}
	if len(sum.Findings) != len(wantFindings) {
		t.Errorf("findings %v, in place %v", sum.Findings, wantFindings)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// healthyThenFailing is the events of healthy connections, then of
// connections that fail (no listener), 50 ms apart.
func healthyThenFailing(healthy, failing int) []event.Event {
	var events []event.Event
	for c := 0; c < healthy+failing; c++ {
		seq := fixture.SNATMissing(true)
		if c >= healthy {
			seq = fixture.NoListener()
		}
		for _, e := range seq {
			fixture.Repeat(&e, c, 50_000_000)
			events = append(events, e)
		}
	}
	return events
}

// With brief timelines, a flow with a finding is shown whole and the
// healthy ones as one line each, at most BriefLinesPerSecond a second:
// the rest are counted in a line of their own, and nothing is lost from
// the count. With findings, healthy flows are not shown at all.
func TestTimelinesKeepFindingsOnScreen(t *testing.T) {
	events := healthyThenFailing(100, 10)
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	for _, tc := range []struct {
		timelines output.Timelines
		shown     int // healthy flows shown
	}{
		{output.TimelinesBrief, BriefLinesPerSecond},
		{output.TimelinesFindings, 0},
	} {
		t.Run(tc.timelines.String(), func(t *testing.T) {
			var got bytes.Buffer
			p := New(Options{Format: "text", Timelines: tc.timelines, Names: names, Stdout: &got})
			for i := range events {
				p.Event(&events[i])
			}
			sum := p.Finish(nil, nil, 0)
			if p.err != nil {
				t.Fatal(p.err)
			}
			var findings, oneLine, counted int
			for _, line := range strings.Split(got.String(), "\n") {
				switch {
				case strings.HasPrefix(line, "flow ") && strings.Contains(line, " ms: "):
					oneLine++
				case strings.HasPrefix(line, "... and "):
					n, err := strconv.Atoi(strings.Fields(line)[2])
					if err != nil {
						t.Fatalf("count line %q: %v", line, err)
					}
					counted += n
				case strings.HasPrefix(line, "  ") && strings.Contains(line, ": ") && !strings.HasPrefix(line, "   "):
					for rule := range sum.Findings {
						if strings.HasPrefix(line, "  "+rule+": ") {
							findings++
						}
					}
				}
			}
			var found uint64
			for _, n := range sum.Findings {
				found += n
			}
			healthy := int(sum.Flows.Flows - found)
			if findings != int(found) || found != 10 || healthy != 100 {
				t.Errorf("%d findings shown, %d found, %d healthy flows; want 10 findings shown, 100 healthy", findings, found, healthy)
			}
			if oneLine != tc.shown {
				t.Errorf("%d healthy flows shown as one line, want %d", oneLine, tc.shown)
			}
			if tc.timelines == output.TimelinesBrief && oneLine+counted != healthy {
				t.Errorf("%d healthy flows shown and %d counted, of %d", oneLine, counted, healthy)
			}
		})
	}
}

// JSON shows the flows --timelines asks for, as text does: a flow with a
// finding whole with its explanation, the healthy ones without their
// packets' steps (brief), not at all (findings) or whole (all); events
// only with --events, before the flows they belong to; the summary last.
func TestJSONTimelines(t *testing.T) {
	events := healthyThenFailing(20, 10)
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	for _, tc := range []struct {
		timelines            output.Timelines
		events               bool
		whole, brief, eventN int
	}{
		{output.TimelinesBrief, false, 10, 20, 0},
		{output.TimelinesFindings, false, 10, 0, 0},
		{output.TimelinesAll, false, 30, 0, 0},
		{output.TimelinesBrief, true, 10, 20, len(events)},
		{output.TimelinesAll, true, 30, 0, len(events)},
	} {
		t.Run(fmt.Sprintf("%s/events=%t", tc.timelines, tc.events), func(t *testing.T) {
			var got bytes.Buffer
			p := New(Options{Format: "json", Timelines: tc.timelines, Events: tc.events, Names: names, Stdout: &got})
			for i := range events {
				p.Event(&events[i])
			}
			p.Finish(nil, nil, 0)
			if p.err != nil {
				t.Fatal(p.err)
			}
			var whole, brief, eventN, explanations int
			var last string
			for _, line := range bytes.Split(bytes.TrimSuffix(got.Bytes(), []byte("\n")), []byte("\n")) {
				var o struct {
					Type    string
					Brief   bool
					Packets []output.JSONPacket
				}
				if err := json.Unmarshal(line, &o); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				last = o.Type
				switch o.Type {
				case "event":
					eventN++
				case "explanation":
					explanations++
				case "flow":
					steps := 0
					for _, pk := range o.Packets {
						steps += len(pk.Steps)
					}
					switch {
					case o.Brief && steps == 0 && len(o.Packets) > 0:
						brief++
					case !o.Brief && steps > 0:
						whole++
					default:
						t.Errorf("flow line brief=%t with %d packets and %d steps: %s", o.Brief, len(o.Packets), steps, line)
					}
				}
			}
			if whole != tc.whole || brief != tc.brief || eventN != tc.eventN || explanations != 10 || last != "summary" {
				t.Errorf("%d whole flows, %d brief, %d events, %d explanations, last %q; want %d, %d, %d, 10, summary",
					whole, brief, eventN, explanations, last, tc.whole, tc.brief, tc.eventN)
			}
		})
	}
}

// TestLossesMarkTheFlowsTheyTouch: the incidents ten seconds apart (more
// than a flow lasts and waits idle), with
// records lost while the third set is open. Its flows wait until the
// losses are counted, say they are incomplete, and keep only the findings
// their events show (the hairpin's rests on a conntrack crossing not
// seen); the others are untouched. In place (json) and on goroutines
// (text) alike.
func TestLossesMarkTheFlowsTheyTouch(t *testing.T) {
	const second = 1_000_000_000
	var seqs [][]event.Event
	for _, healthy := range []bool{false, true} {
		seqs = append(seqs, fixture.SNATMissing(healthy), fixture.SYNOverflow(healthy), fixture.StaleHostPort(healthy), fixture.Hairpin(healthy))
	}
	var events []event.Event
	for c := range 5 {
		for _, seq := range seqs {
			for _, e := range seq {
				fixture.Repeat(&e, c, 10*second)
				events = append(events, e)
			}
		}
	}
	lossAt := events[0].Time + 21*second // while the third set is open
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	for _, format := range []string{"json", "text"} {
		var out bytes.Buffer
		p := New(Options{Format: format, Timelines: output.TimelinesAll, Names: names, Stdout: &out, Losses: &flow.Losses{}})
		// The live loop's counts: every tick (100 ms), through a little
		// before the tick.
		const tick = 100_000_000
		counted, now := uint64(0), uint64(0)
		count := func(at uint64) {
			win := event.LossWindow{From: counted, To: at}
			if counted < lossAt && lossAt <= at {
				win.N = 9
			}
			p.LossesCounted(win, at-1)
			counted = at - 1
			p.Tick(at)
		}
		for i := range events {
			for now+tick < events[i].Time {
				now += tick
				count(now)
			}
			p.Event(&events[i])
			now = max(now, events[i].Time)
		}
		count(now + 1)
		sum := p.Finish(nil, nil, 0)
		if p.err != nil {
			t.Fatal(p.err)
		}
		// A healthy twin's connection is its faulty twin's (one tuple):
		// four flows a set.
		if sum.Incomplete != 4 {
			t.Errorf("%s: %d flows incomplete, want the third set's 4", format, sum.Incomplete)
		}
		want := map[string]uint64{"snat-missing-on-tunnel": 5, "syn-dropped-at-listener": 5, "dnat-to-dead-endpoint": 5, "reply-bypassed-nat": 4}
		for rule, n := range want {
			if sum.Findings[rule] != n {
				t.Errorf("%s: %d %s findings, want %d (%v)", format, sum.Findings[rule], rule, n, sum.Findings)
			}
		}
		marks := strings.Count(out.String(), "records lost while it was open") + strings.Count(out.String(), `"incomplete":true`)
		if marks != 4 {
			t.Errorf("%s: %d flows shown incomplete, want 4", format, marks)
		}
	}
}

// TestFlowsWaitForTheirRuleTraces: with rules traced, a flow whose losses
// are counted still waits until the trace steps of its packets are read,
// and no longer than ruleset.TraceWindow past its end when the reader
// never catches up.
func TestFlowsWaitForTheirRuleTraces(t *testing.T) {
	events := fixture.SNATMissing(false)
	last := events[len(events)-1].Time
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	for _, catchUp := range []bool{true, false} {
		var read uint64
		var out bytes.Buffer
		p := New(Options{Format: "json", Names: names, Stdout: &out, Losses: &flow.Losses{},
			RuleTracesRead: func() uint64 { return read }})
		for i := range events {
			p.Event(&events[i])
		}
		ended := last + uint64(flow.DefaultConfig.Idle) + 1
		p.Tick(ended)
		p.LossesCounted(event.LossWindow{To: ended}, ended)
		if len(p.losses.unsure) == 0 {
			t.Fatal("flows explained before their rule traces were read")
		}
		held, flowEnded := len(p.losses.unsure), p.losses.unsure[len(p.losses.unsure)-1].Ended
		if catchUp {
			read = flowEnded
			p.LossesCounted(event.LossWindow{From: ended, To: ended + 1}, ended+1)
		} else {
			stall := flowEnded + ruleset.TraceWindow
			p.LossesCounted(event.LossWindow{From: ended, To: stall - 1}, stall-1)
			if len(p.losses.unsure) != held {
				t.Fatalf("stalled reader: %d of %d flows let go before the trace window was over", held-len(p.losses.unsure), held)
			}
			p.LossesCounted(event.LossWindow{From: stall - 1, To: stall}, stall)
		}
		if len(p.losses.unsure) != 0 {
			t.Errorf("caught up %v: %d flows still waiting", catchUp, len(p.losses.unsure))
		}
		sum := p.Finish(nil, nil, 0)
		if sum.Findings["snat-missing-on-tunnel"] != 1 {
			t.Errorf("caught up %v: findings %v", catchUp, sum.Findings)
		}
	}
}
