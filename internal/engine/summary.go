package engine

import (
	"encoding/json"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// jsonSummary is the summary as the JSON output's last object has it
// (docs/events.md).
type jsonSummary struct {
	Type       string            `json:"type"`
	DurationMS int64             `json:"duration_ms"`
	Events     map[string]uint64 `json:"events"`
	// Records counts the kernel records the events came in (live runs
	// only): the kernel gathers a packet's device hops into one.
	Records uint64            `json:"kernel_records,omitempty"`
	Lost    map[string]uint64 `json:"lost"`
	// Shed are the records not sent, per point, to keep room for evidence
	// in a filling ring buffer (probe.Tracer.Shed).
	Shed         map[string]uint64 `json:"shed"`
	Flows        uint64            `json:"flows"`
	FlowsEvicted uint64            `json:"flows_evicted"`
	// Contradictions counts events that named a known flow but belonged
	// to another connection (flow.Stats.Contradictions).
	Contradictions uint64 `json:"contradictions"`
	// Unheld counts route lookups not kept because one packet had too
	// many (flow.Stats.Unheld).
	Unheld uint64 `json:"route_lookups_not_kept,omitempty"`
	// Incomplete counts the flows records were lost around: none of
	// their findings rests on what they lack.
	Incomplete uint64            `json:"flows_incomplete"`
	Findings   map[string]uint64 `json:"findings"`
	// Gate is what the kernel gate did (--healthy count).
	Gate *jsonGate `json:"gate,omitempty"`
	// Clocks are how a replay of several recordings placed the clocks of
	// all but the first.
	Clocks []jsonClock `json:"clocks,omitempty"`
}

// jsonClock is one recording's clock as replay placed it (trace.ClockSkew).
type jsonClock struct {
	Host      string   `json:"host"`
	OffsetMS  float64  `json:"offset_ms"`
	Packets   int      `json:"packets"`
	Placement string   `json:"placement"`
	AtLeastMS *float64 `json:"at_least_ms,omitempty"`
	AtMostMS  *float64 `json:"at_most_ms,omitempty"`
}

// jsonGate is event.GateCounts as the summary has it (docs/events.md).
type jsonGate struct {
	Held      uint64 `json:"records_held"`
	Released  uint64 `json:"records_released"`
	Healthy   uint64 `json:"connections_healthy"`
	Discarded uint64 `json:"records_discarded"`
	Triggered uint64 `json:"connections_triggered"`
	Missing   uint64 `json:"records_missing"`
	// EndedThenTrouble are of Missing (event.GateCounts).
	EndedThenTrouble uint64 `json:"connections_ended_then_trouble"`
	Refused          string `json:"refused,omitempty"`
}

// SummaryJSON is the summary as the JSON output's last line has it, for
// diagnostics in JSON (docs/events.md).
func SummaryJSON(s output.Summary) []byte {
	// Marshal cannot fail on a summary: plain values and maps of them.
	b, _ := json.Marshal(summaryJSON(s))
	return b
}

func summaryJSON(s output.Summary) jsonSummary {
	sum := jsonSummary{Type: "summary", DurationMS: s.Duration.Milliseconds(), Events: PointNames(s.Events), Records: s.Records,
		Lost: PointNames(s.Lost), Shed: PointNames(s.Shed), Flows: s.Flows.Flows, FlowsEvicted: s.Flows.Evicted,
		Contradictions: s.Flows.Contradictions, Unheld: s.Flows.Unheld, Incomplete: s.Incomplete, Findings: s.Findings}
	if g := s.Gate; g != nil {
		sum.Gate = &jsonGate{Held: g.Held, Released: g.Released, Healthy: g.Healthy, Discarded: g.Discarded, Triggered: g.Triggered, Missing: g.Missing,
			EndedThenTrouble: g.EndedThenTrouble, Refused: g.Refused}
	}
	ms := func(d time.Duration) *float64 { v := float64(d) / 1e6; return &v }
	for i, k := range s.Clocks {
		if i == 0 {
			continue // the clock the others are placed against
		}
		c := jsonClock{Host: k.Host, OffsetMS: *ms(k.Offset), Packets: k.Packets, Placement: k.Placement().String()}
		if k.HasLower {
			c.AtLeastMS = ms(k.Lower)
		}
		if k.HasUpper {
			c.AtMostMS = ms(k.Upper)
		}
		sum.Clocks = append(sum.Clocks, c)
	}
	return sum
}

// PointNames keys per-point counts by the points' names, every point present.
func PointNames(m map[event.Point]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range event.Points {
		out[p.String()] = m[p]
	}
	return out
}
