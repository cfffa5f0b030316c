package output

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// JSONStep is one event of a packet's path.
type JSONStep struct {
	OffsetUS float64    `json:"offset_us"`
	Netns    string     `json:"netns,omitempty"`
	Dev      string     `json:"dev,omitempty"`
	Point    string     `json:"point"`
	Kind     string     `json:"kind"`
	Hook     string     `json:"hook,omitempty"`
	What     string     `json:"what"`
	Tuple    *JSONTuple `json:"tuple"`
	Outer    *JSONTuple `json:"outer,omitempty"` // encapsulated: the tunnel's tuple (Tuple is the inner one)
}

// JSONPacket is one packet of a flow.
type JSONPacket struct {
	Skb       string     `json:"skb"`
	Direction string     `json:"direction"`
	Label     string     `json:"label"`
	Tuple     *JSONTuple `json:"tuple"`
	Steps     []JSONStep `json:"steps"`
	End       string     `json:"end"`
}

// JSONFlow is the schema of {"type":"flow"} objects.
type JSONFlow struct {
	Type       string       `json:"type"`
	ID         uint64       `json:"id"`
	Start      time.Time    `json:"start"`
	DurationMS float64      `json:"duration_ms"`
	Tuple      *JSONTuple   `json:"tuple"`
	Packets    []JSONPacket `json:"packets"`
	Socket     []JSONStep   `json:"socket,omitempty"`
	Unkept     uint64       `json:"events_not_kept,omitempty"`
	Finding    string       `json:"finding,omitempty"`
}

// JSONEvidence is one event backing an explanation.
type JSONEvidence struct {
	Time  time.Time `json:"time"`
	Netns string    `json:"netns,omitempty"`
	Dev   string    `json:"dev,omitempty"`
	Point string    `json:"point"`
	Kind  string    `json:"kind"`
	Hook  string    `json:"hook,omitempty"`
	Skb   string    `json:"skb,omitempty"`
	Fact  string    `json:"fact"`
}

// JSONFlowRef identifies the flow an explanation is about.
type JSONFlowRef struct {
	ID    uint64     `json:"id"`
	Tuple *JSONTuple `json:"tuple"`
}

// JSONExplanation is the schema of {"type":"explanation"} objects.
type JSONExplanation struct {
	Type     string         `json:"type"`
	Rule     string         `json:"rule"`
	Severity string         `json:"severity"`
	Summary  string         `json:"summary"`
	Flow     JSONFlowRef    `json:"flow"`
	Evidence []JSONEvidence `json:"evidence"`
}

func (n Names) step(e *event.Event, start uint64) JSONStep {
	s := JSONStep{OffsetUS: float64(int64(e.Time)-int64(start)) / 1e3, Netns: n.netns(e.Netns), Dev: e.Ifname.String(),
		Point: e.Point.String(), Kind: e.Kind.String(), Hook: e.Hook.String(), What: n.Step(e), Tuple: NewJSONTuple(e.Tuple)}
	if e.HasInner() {
		s.Tuple, s.Outer = NewJSONTuple(e.Inner), NewJSONTuple(e.Tuple)
	}
	return s
}

// direction names a packet's direction in its flow. A group or broadcast
// datagram has no reply: it is named for what it is.
func direction(client, t event.Tuple, p *flow.Packet) string {
	group := false
	for i := range p.Events {
		group = group || p.Events[i].ToGroup()
	}
	switch {
	case group && t.Dst.IsMulticast():
		return "multicast"
	case group:
		return "broadcast"
	case t.Src != client.Src || t.Sport != client.Sport:
		return "reply"
	}
	return "request"
}

// ConvertFlow builds the JSON object of a flow.
func (n Names) ConvertFlow(f *flow.Flow, fd *explain.Finding) *JSONFlow {
	j := &JSONFlow{Type: "flow", ID: f.ID, Start: n.wall(f.Start), DurationMS: float64(f.End-f.Start) / 1e6, Tuple: NewJSONTuple(f.Tuple()),
		Unkept: f.Unkept}
	client := f.Tuple()
	for _, p := range f.Packets {
		t := firstTuple(p)
		dir := direction(client, t, p)
		jp := JSONPacket{Skb: fmt.Sprintf("%#x", p.Skb), Direction: dir, Label: packetLabel(t), Tuple: NewJSONTuple(t), End: n.PacketEnd(p)}
		for i := range p.Events {
			jp.Steps = append(jp.Steps, n.step(&p.Events[i], f.Start))
		}
		j.Packets = append(j.Packets, jp)
	}
	for i := range f.Socket {
		j.Socket = append(j.Socket, n.step(&f.Socket[i], f.Start))
	}
	if fd != nil {
		j.Finding = fd.Rule
	}
	return j
}

// ConvertFinding builds the JSON object of an explanation.
func (n Names) ConvertFinding(f *flow.Flow, fd *explain.Finding) *JSONExplanation {
	j := &JSONExplanation{Type: "explanation", Rule: fd.Rule, Severity: fd.Severity, Summary: fd.Summary,
		Flow: JSONFlowRef{ID: f.ID, Tuple: NewJSONTuple(f.Tuple())}}
	for _, ev := range fd.Evidence {
		e := ev.Event
		je := JSONEvidence{Time: n.wall(e.Time), Netns: n.netns(e.Netns), Dev: e.Ifname.String(), Point: e.Point.String(),
			Kind: e.Kind.String(), Hook: e.Hook.String(), Fact: ev.Fact}
		if e.Skb != 0 {
			je.Skb = fmt.Sprintf("%#x", e.Skb)
		}
		j.Evidence = append(j.Evidence, je)
	}
	return j
}

// Flow writes a flow and its finding as JSON objects.
func (j *JSON) Flow(f *flow.Flow, fd *explain.Finding) error {
	if err := j.enc.Encode(j.names.ConvertFlow(f, fd)); err != nil {
		return err
	}
	if fd == nil {
		return nil
	}
	return j.enc.Encode(j.names.ConvertFinding(f, fd))
}

// Colours for a terminal.
type palette struct{ bold, red, yellow, dim, reset string }

var (
	colours   = palette{"\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[2m", "\x1b[0m"}
	noColours = palette{}
)

// Flow writes a flow as a timeline, one block per packet, kept to what a
// person needs: translations, the missing SNAT after a DNAT, encapsulation,
// the devices a packet entered, listener outcomes and drops. A packet that
// took the same path as an earlier one (a retransmit) is one line. JSON
// output has every step.
func (t *Text) Flow(f *flow.Flow, fd *explain.Finding) error {
	c := noColours
	if t.Colour {
		c = colours
	}
	var b strings.Builder
	ft := f.Tuple()
	fmt.Fprintf(&b, "%sflow %d  %s %s > %s%s  %s, %d packets, %.1f ms\n", c.bold, f.ID, event.ProtoName(ft.Proto),
		addrPort(ft, true), addrPort(ft, false), c.reset, t.names.wall(f.Start).Format("15:04:05.000"), len(f.Packets), float64(f.End-f.Start)/1e6)
	jf := t.names.ConvertFlow(f, fd)
	seen := map[string]int{}
	for i, p := range jf.Packets {
		label := fmt.Sprintf("%s %s %s > %s", p.Direction, p.Label, addr(p.Tuple, true), addr(p.Tuple, false))
		sig := pathSignature(p)
		if first, ok := seen[sig]; ok {
			fmt.Fprintf(&b, "  %s  at %+.3fms: same path as packet %d\n", label, p.Steps[0].OffsetUS/1e3, first)
			continue
		}
		seen[sig] = i + 1
		fmt.Fprintf(&b, "  %d %s\n", i+1, label)
		dnatIn := map[string]bool{}
		shown := make([]string, len(p.Steps))
		any := false
		for k, s := range p.Steps {
			if s.Point == "nat" && strings.HasPrefix(s.What, "DNAT") {
				dnatIn[s.Netns] = true
			}
			if what, show := briefStep(s, k == len(p.Steps)-1, dnatIn[s.Netns]); show {
				shown[k], any = what, true
			}
		}
		for k, s := range p.Steps {
			what := shown[k]
			if !any {
				what = s.What // nothing notable: show the plain path
			} else if what == "" {
				continue
			}
			where := s.Netns
			if s.Dev != "" {
				where += "/" + s.Dev
			}
			at := s.Point
			if s.Hook != "" {
				at += " " + s.Hook
			}
			if s.Point == "drop" {
				what = c.red + what + c.reset
			}
			fmt.Fprintf(&b, "    %s%+10.3fms%s  %-24s %-17s %s\n", c.dim, s.OffsetUS/1e3, c.reset, where, at, what)
		}
		fmt.Fprintf(&b, "    => %s\n", p.End)
	}
	if f.Unkept > 0 {
		fmt.Fprintf(&b, "  ... and %d events of later packets, not kept (--max-packets)\n", f.Unkept)
	}
	if fd != nil {
		fmt.Fprintf(&b, "  %s%s%s: %s\n", c.red+c.bold, fd.Rule, c.reset, fd.Summary)
		for _, ev := range fd.Evidence {
			fmt.Fprintf(&b, "    - %s\n", ev.Fact)
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(t.w, b.String())
	return err
}

// briefStep decides whether the text timeline shows a step, and how.
func briefStep(s JSONStep, last, dnatHere bool) (string, bool) {
	switch {
	case s.Point == "nat" && s.What == "no NAT":
		if dnatHere && s.Hook == "POSTROUTING" && s.Outer == nil {
			return "no SNAT (source unchanged after the DNAT)", true
		}
		return "", false
	case s.Point == "dev" && s.Kind == "tx" && !last:
		return "", false
	case s.Point == "dev":
		return s.Kind, true
	}
	return s.What, true
}

// pathSignature identifies the way a packet went, without its timing.
func pathSignature(p JSONPacket) string {
	var b strings.Builder
	b.WriteString(p.Direction + "|" + p.Label + "|" + p.End)
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "|%s/%s %s %s %s", s.Netns, s.Dev, s.Point, s.Hook, s.What)
	}
	return b.String()
}

func addr(t *JSONTuple, source bool) string {
	if source {
		return fmt.Sprintf("%s:%d", t.Src, t.Sport)
	}
	return fmt.Sprintf("%s:%d", t.Dst, t.Dport)
}
