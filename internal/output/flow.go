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
	t := e.Tuple
	if e.HasInner() {
		t = e.Inner
	}
	return JSONStep{OffsetUS: float64(int64(e.Time)-int64(start)) / 1e3, Netns: n.netns(e.Netns), Dev: e.Ifname.String(),
		Point: e.Point.String(), Kind: e.Kind.String(), Hook: e.Hook.String(), What: n.Step(e), Tuple: NewJSONTuple(t)}
}

// ConvertFlow builds the JSON object of a flow.
func (n Names) ConvertFlow(f *flow.Flow, fd *explain.Finding) *JSONFlow {
	j := &JSONFlow{Type: "flow", ID: f.ID, Start: n.wall(f.Start), DurationMS: float64(f.End-f.Start) / 1e6, Tuple: NewJSONTuple(f.Tuple())}
	client := f.Tuple()
	for _, p := range f.Packets {
		t := firstTuple(p)
		dir := "request"
		if t.Src != client.Src || t.Sport != client.Sport {
			dir = "reply"
		}
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

// Flow writes a flow as a timeline: one block per packet, consecutive
// packets that took the same path folded into one, and the finding.
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
	for i := 0; i < len(jf.Packets); {
		p := jf.Packets[i]
		same := i + 1
		for same < len(jf.Packets) && samePath(p, jf.Packets[same]) {
			same++
		}
		label := fmt.Sprintf("%s %s %s > %s", p.Direction, p.Label, addr(p.Tuple, true), addr(p.Tuple, false))
		if same-i > 1 {
			label += fmt.Sprintf("  x%d, same path", same-i)
		}
		fmt.Fprintf(&b, "  %s\n", label)
		for _, s := range p.Steps {
			where := s.Netns
			if s.Dev != "" {
				where += "/" + s.Dev
			}
			at := s.Point
			if s.Hook != "" {
				at += " " + s.Hook
			}
			what := s.What
			if s.Point == "drop" {
				what = c.red + what + c.reset
			}
			fmt.Fprintf(&b, "    %s%+10.3fms%s  %-24s %-17s %s\n", c.dim, s.OffsetUS/1e3, c.reset, where, at, what)
		}
		fmt.Fprintf(&b, "    => %s\n", p.End)
		i = same
	}
	for _, s := range jf.Socket {
		fmt.Fprintf(&b, "  socket %s%+10.3fms%s  %-24s %-10s %s\n", c.dim, s.OffsetUS/1e3, c.reset, s.Netns, s.Point, s.What)
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

func addr(t *JSONTuple, source bool) string {
	if source {
		return fmt.Sprintf("%s:%d", t.Src, t.Sport)
	}
	return fmt.Sprintf("%s:%d", t.Dst, t.Dport)
}

// samePath says whether two packets went the same way (retransmits).
func samePath(a, b JSONPacket) bool {
	if a.Direction != b.Direction || a.Label != b.Label || a.End != b.End || len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		x, y := a.Steps[i], b.Steps[i]
		if x.Netns != y.Netns || x.Dev != y.Dev || x.Point != y.Point || x.Hook != y.Hook || x.What != y.What {
			return false
		}
	}
	return true
}
