package output

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// Text writes one line per event: time, netns/device, point and hook,
// tuple, "->" translated tuple, conntrack entry, and what happened.
type Text struct {
	w     io.Writer
	names Names
	ctIDs map[uint64]int // conntrack addresses shown as short numbers
	// Colour marks drops and findings with ANSI colours (for a terminal).
	Colour bool
	// Timelines says how much of a flow without a finding is shown.
	Timelines Timelines
	tl        timeline
}

// Timelines is how much of the flows without a finding is shown: on a busy
// node thousands of healthy flows would scroll the one that failed off the
// screen, and written whole to JSON they cost more than everything else
// nettrace does. A flow with a finding is always shown whole.
type Timelines int

const (
	// TimelinesBrief shows a healthy flow as one line (text) or without
	// its packets' steps (JSON).
	TimelinesBrief Timelines = iota
	// TimelinesFindings shows flows with a finding only.
	TimelinesFindings
	// TimelinesAll shows every flow whole.
	TimelinesAll
)

var timelinesNames = []string{TimelinesBrief: "brief", TimelinesFindings: "findings", TimelinesAll: "all"}

func (t Timelines) String() string { return timelinesNames[t] }

// Detail is what a report must carry for the flows t shows whole: their
// steps' words.
func (t Timelines) Detail() explain.Detail {
	if t == TimelinesAll {
		return explain.Detail{Steps: explain.AllFlows}
	}
	return explain.Detail{Steps: explain.FlowsWithFinding}
}

// ParseTimelines reads a --timelines value.
func ParseTimelines(s string) (Timelines, error) {
	for i, n := range timelinesNames {
		if n == s {
			return Timelines(i), nil
		}
	}
	return 0, fmt.Errorf("%q: want brief, findings or all", s)
}

// NewText returns a text writer.
func NewText(w io.Writer, names Names) *Text {
	return &Text{w: w, names: names, ctIDs: map[uint64]int{}}
}

func (t *Text) ctRef(e *event.Event) string {
	if !e.HasCT() {
		return ""
	}
	id, ok := t.ctIDs[e.CT.ID]
	if !ok {
		id = len(t.ctIDs) + 1
		t.ctIDs[e.CT.ID] = id
	}
	dir := ""
	if e.CT.IsReply() {
		dir = " reply"
	}
	var bits []string
	if e.CT.Status&event.CTDstNAT != 0 {
		bits = append(bits, "DNAT")
	}
	if e.CT.Status&event.CTSrcNAT != 0 {
		bits = append(bits, "SNAT")
	}
	if e.CT.Status&event.CTSeenReply != 0 {
		bits = append(bits, "seen-reply")
	}
	if e.CT.Status&event.CTConfirmed == 0 {
		bits = append(bits, "new")
	}
	s := fmt.Sprintf("ct#%d%s", id, dir)
	if len(bits) > 0 {
		s += " [" + strings.Join(bits, ",") + "]"
	}
	return s
}

// Event writes one line.
func (t *Text) Event(e *event.Event) error {
	where := t.names.netns(e.Netns)
	if name := e.Ifname.String(); name != "" {
		where += "/" + name
	}
	what := e.Point.String() + " " + e.Kind.String()
	if e.Kind.String() == e.Point.String() {
		what = e.Point.String()
	}
	if e.Point == event.PointNAT || e.Hook != event.HookNone {
		what = e.Point.String() + " " + e.Hook.String()
	}
	var detail []string
	detail = event.ViewOf(e.Point).Detail(t.names.lookup(), e, detail)
	if ct := t.ctRef(e); ct != "" {
		detail = append(detail, ct)
	}
	_, err := fmt.Fprintf(t.w, "%s %-24s %-17s %s\n", t.names.wall(e.Time).Format("15:04:05.000000"),
		where, what, strings.Join(detail, " "))
	return err
}

// WriteSummary writes the end-of-run summary.
func WriteSummary(w io.Writer, s Summary) {
	var parts []string
	var total, lost uint64
	for _, p := range event.Points {
		if n := s.Events[p]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p, n))
			total += n
		}
		lost += s.Lost[p]
	}
	perPoint := ""
	if len(parts) > 0 {
		perPoint = " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintf(w, "nettrace: %d events in %s%s", total, s.Duration.Round(1e6), perPoint)
	if s.Records > 0 {
		fmt.Fprintf(w, " from %d kernel records", s.Records)
	}
	fmt.Fprintf(w, "; %d lost", lost)
	if lost > 0 {
		fmt.Fprintf(w, " (%s: enlarge --ring-size or narrow the filter)", perPointCounts(s.Lost))
	}
	if shed := perPointCounts(s.Shed); shed != "" {
		fmt.Fprintf(w, "; shed to keep room for evidence of failure: %s", shed)
	}
	if s.Incomplete > 0 {
		fmt.Fprintf(w, "; %d flows incomplete (records lost or shed while they were open: no finding drawn from what they lack)", s.Incomplete)
	}
	fmt.Fprintln(w)
	if g := s.Gate; g != nil && g.Refused != "" {
		fmt.Fprintf(w, "nettrace: --healthy count did not run: %s\n", g.Refused)
	} else if g != nil {
		fmt.Fprintf(w, "nettrace: kept in the kernel: %d healthy connections ended normally, their %d records never shipped; %d connections showed trouble and shipped their %d held records",
			g.Healthy, g.Discarded, g.Triggered, g.Released)
		if g.Missing > 0 {
			fmt.Fprintf(w, ", lacking %d (counted lost)", g.Missing)
		}
		fmt.Fprintln(w)
	}
	var found []string
	for rule, n := range s.Findings {
		found = append(found, fmt.Sprintf("%s %d", rule, n))
	}
	sort.Strings(found)
	unheld := ""
	if s.Flows.Unheld > 0 {
		unheld = fmt.Sprintf(", %d route lookups not kept (more than %d for one packet)", s.Flows.Unheld, flow.MaxHeld)
	}
	fmt.Fprintf(w, "nettrace: %d flows (%d ended early at the flow limit, %d started by a new connection on a known tuple%s); findings: %s\n",
		s.Flows.Flows, s.Flows.Evicted, s.Flows.Contradictions, unheld, orNone(found))
	for i, k := range s.Clocks {
		if i > 0 {
			fmt.Fprintf(w, "nettrace: clock of %s: %s\n", k.Host, clockSentence(k, s.Clocks[0].Host))
		}
	}
}

// clockSentence says where a recording's clock was placed against the
// first recording's (first), and how far its times can be trusted.
func clockSentence(k trace.ClockSkew, first string) string {
	packets := "packets"
	if k.Packets == 1 {
		packets = "packet"
	}
	placed := fmt.Sprintf("%s %s %s's by %d %s seen on both", durationMS(k.Offset.Abs()), aheadOrBehind(k.Offset), first, k.Packets, packets)
	switch k.Placement() {
	case trace.Bounded:
		return fmt.Sprintf("%s, both ways: each time right within %s", placed, durationMS((k.Upper-k.Lower)/2))
	case trace.Earliest:
		return fmt.Sprintf("%s, all towards %s: its times are the earliest they allow (the quickest crossing taken as instant), each may have been later by an amount no packet bounds", placed, k.Host)
	case trace.Latest:
		return fmt.Sprintf("%s, all from %s: its times are the latest they allow (the quickest crossing taken as instant), each may have been earlier by an amount no packet bounds", placed, k.Host)
	}
	return fmt.Sprintf("not placed: no packet seen both there and by the recordings placed before it, so its times are its own clock's and may be off from %s's by seconds", first)
}

func aheadOrBehind(d time.Duration) string {
	if d < 0 {
		return "behind"
	}
	return "ahead of"
}

// durationMS writes a duration in milliseconds to the microsecond, as the
// timelines write times.
func durationMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) + " ms"
}

// perPointCounts says "dev 12, route 3" of the points with a count.
func perPointCounts(m map[event.Point]uint64) string {
	var parts []string
	for _, p := range event.Points {
		if m[p] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p, m[p]))
		}
	}
	return strings.Join(parts, ", ")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
