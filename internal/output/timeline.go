package output

import (
	"strconv"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// Colours for a terminal.
type palette struct{ bold, red, yellow, dim, reset string }

var (
	colours   = palette{"\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[2m", "\x1b[0m"}
	noColours = palette{}
)

// timeline is the reusable state of rendering flows as text: a replay
// renders tens of thousands of flows, so every buffer is kept between
// them.
type timeline struct {
	buf  []byte
	sig  []byte
	seen map[string]int // path signature -> packet number
}

// Flow writes a flow as a timeline, one block per packet, kept to what a
// person needs: translations, the missing SNAT after a DNAT, encapsulation,
// the devices a packet entered, listener outcomes and drops. A packet that
// took the same path as an earlier one (a retransmit) is one line. JSON
// output has every step.
func (t *Text) Flow(f *flow.Flow, r *explain.Report) error {
	t.tl.buf = t.AppendFlow(t.tl.buf[:0], f, r)
	_, err := t.w.Write(t.tl.buf)
	return err
}

// Copy returns a Text with the same settings and buffers of its own, for
// another goroutine to render flows with (AppendFlow) at the same time.
func (t *Text) Copy() *Text {
	return &Text{w: t.w, names: t.names, ctIDs: map[uint64]int{}, Colour: t.Colour, Timelines: t.Timelines}
}

// AppendFlow appends the timeline Flow writes to b: nothing, or one line,
// for a flow without a finding when Timelines says so.
func (t *Text) AppendFlow(b []byte, f *flow.Flow, r *explain.Report) []byte {
	fd := r.Finding
	c := noColours
	if t.Colour {
		c = colours
	}
	if fd == nil && t.Timelines == TimelinesFindings {
		return b
	}
	b = t.appendHeader(b, f, c)
	if fd == nil && t.Timelines == TimelinesBrief {
		return append(append(append(b, ": "...), Outcome(r)...), '\n')
	}
	b = append(b, '\n')
	t.tl.newFlow()
	for i, p := range f.Packets {
		rp := &r.Packets[i]
		if first := t.tl.sameAs(i, p, rp); first > 0 {
			b = append(b, "  "...)
			b = appendPacketLabel(b, rp)
			b = append(b, "  at "...)
			b = appendOffset(b, p.Events[0].Time, f.Start, 0)
			b = append(b, ": same path as packet "...)
			b = strconv.AppendInt(b, int64(first), 10)
			b = append(b, '\n')
			continue
		}
		b = append(b, "  "...)
		b = strconv.AppendInt(b, int64(i+1), 10)
		b = append(b, ' ')
		b = appendPacketLabel(b, rp)
		b = append(b, '\n')
		for k, s := range rp.Steps {
			if !s.Shown {
				continue
			}
			e := &p.Events[k]
			b = t.appendStep(b, c, f.Start, e, s.Timeline, s.Lost)
			if fd != nil {
				b = appendRules(b, fd.NetfilterRules, e)
			}
		}
		b = append(append(append(b, "    => "...), rp.TimelineEnd...), '\n')
	}
	if f.Unkept > 0 {
		b = append(b, "  ... and "...)
		b = strconv.AppendUint(b, f.Unkept, 10)
		b = append(b, " events of later packets, not kept (--max-packets)\n"...)
	}
	if fd != nil {
		b = appendFinding(b, c, fd)
	}
	return append(b, '\n')
}

// newFlow starts folding a flow's packets.
func (tl *timeline) newFlow() {
	if tl.seen == nil {
		tl.seen = map[string]int{}
	}
	clear(tl.seen)
}

// sameAs says which earlier packet of the flow (numbered from 1) took
// packet i's path, 0 for none; a packet of a new path is remembered.
func (tl *timeline) sameAs(i int, p *flow.Packet, rp *explain.Packet) int {
	tl.sign(p, rp)
	if first, ok := tl.seen[string(tl.sig)]; ok {
		return first
	}
	tl.seen[string(tl.sig)] = i + 1
	return 0
}

// sign makes tl.sig what tells a packet's timeline from another's: its
// direction, label and end, and each step's place, point, hook and words.
func (tl *timeline) sign(p *flow.Packet, rp *explain.Packet) {
	tl.sig = append(append(append(tl.sig[:0], rp.Direction...), rp.Label...), rp.TimelineEnd...)
	for k := range p.Events {
		e, s := &p.Events[k], &rp.Steps[k]
		tl.sig = strconv.AppendUint(append(tl.sig, '|'), uint64(e.Netns), 10)
		tl.sig = append(append(tl.sig, '/'), e.Ifname.String()...)
		tl.sig = append(tl.sig, byte(e.Point), byte(e.Hook), ' ')
		if s.Shown {
			tl.sig = append(tl.sig, s.Timeline...)
		} else {
			tl.sig = append(tl.sig, s.What...)
		}
	}
}

// appendStep appends one step of a packet's timeline: its offset from the
// flow's start, namespace and device, point and hook, and what it did (in
// red for a drop).
func (t *Text) appendStep(b []byte, c palette, start uint64, e *event.Event, what string, red bool) []byte {
	b = append(b, "    "...)
	b = append(b, c.dim...)
	b = appendOffset(b, e.Time, start, 10)
	b = append(b, c.reset...)
	b = append(b, "  "...)
	mark := len(b)
	b = append(b, t.names.netns(e.Netns)...)
	if dev := e.Ifname.String(); dev != "" {
		b = append(append(b, '/'), dev...)
	}
	b = pad(b, mark, 24)
	b = append(b, ' ')
	mark = len(b)
	b = append(b, e.Point.String()...)
	if h := e.Hook.String(); h != "" {
		b = append(append(b, ' '), h...)
	}
	b = pad(b, mark, 17)
	b = append(b, ' ')
	if red {
		b = append(append(append(b, c.red...), what...), c.reset...)
	} else {
		b = append(b, what...)
	}
	return append(b, '\n')
}

// appendFinding appends a flow's finding: its rule, its sentence and its
// evidence.
func appendFinding(b []byte, c palette, fd *explain.Finding) []byte {
	b = append(append(append(append(b, "  "...), c.red...), c.bold...), fd.Rule...)
	b = append(append(append(b, c.reset...), ": "...), fd.Summary...)
	b = append(b, '\n')
	for _, ev := range fd.Evidence {
		b = append(append(append(b, "    - "...), ev.Fact...), '\n')
	}
	return b
}

// appendHeader appends a flow's first line, without its newline: "flow 12
// tcp 10.0.0.1:40000 > 10.96.0.10:80  15:04:05.000, 7 packets, 3.1 ms".
func (t *Text) appendHeader(b []byte, f *flow.Flow, c palette) []byte {
	ft := f.Tuple()
	b = append(b, c.bold...)
	b = append(b, "flow "...)
	b = strconv.AppendUint(b, f.ID, 10)
	b = append(b, "  "...)
	b = append(b, event.ProtoName(ft.Proto)...)
	b = append(b, ' ')
	b = appendAddrPorts(b, ft)
	b = append(b, c.reset...)
	b = append(b, "  "...)
	b = t.names.wall(f.Start).AppendFormat(b, "15:04:05.000")
	b = append(b, ", "...)
	b = strconv.AppendInt(b, int64(len(f.Packets)), 10)
	if len(f.Packets) == 1 {
		b = append(b, " packet, "...)
	} else {
		b = append(b, " packets, "...)
	}
	b = strconv.AppendFloat(b, float64(f.End-f.Start)/1e6, 'f', 1, 64)
	b = append(b, " ms"...)
	if f.LostAround > 0 {
		b = append(b, ", incomplete: "...)
		b = strconv.AppendUint(b, f.LostAround, 10)
		b = append(b, " records lost while it was open"...)
	}
	return b
}

// stepIndent puts a line under a step's "what" column.
const stepIndent = "                                                             "

// appendRules appends, under a step, the netfilter rules a finding names
// for it.
func appendRules(b []byte, rules []explain.NetfilterRule, e *event.Event) []byte {
	for _, r := range rules {
		if r.At == e.Time && r.Netns == e.Netns {
			b = append(append(append(b, stepIndent...), r.Step()...), '\n')
		}
	}
	return b
}

// appendOffset appends the time of an event from the flow's start in
// milliseconds, signed, right-aligned in width.
func appendOffset(b []byte, at, start uint64, width int) []byte {
	us := float64(int64(at)-int64(start)) / 1e3
	var num [32]byte
	n := num[:0]
	if us >= 0 {
		n = append(n, '+')
	}
	n = strconv.AppendFloat(n, us/1e3, 'f', 3, 64)
	for i := len(n); i < width; i++ {
		b = append(b, ' ')
	}
	return append(append(b, n...), "ms"...)
}

// pad fills b with spaces from mark to width, as %-*s does.
func pad(b []byte, mark, width int) []byte {
	for len(b)-mark < width {
		b = append(b, ' ')
	}
	return b
}

func appendPacketLabel(b []byte, rp *explain.Packet) []byte {
	b = append(append(append(append(b, rp.Direction...), ' '), rp.Label...), ' ')
	return appendAddrPorts(b, rp.Tuple)
}

// appendAddrPorts appends "src:sport > dst:dport".
func appendAddrPorts(b []byte, t event.Tuple) []byte {
	b = event.AppendAddrPort(b, t.Src, t.Sport)
	b = append(b, " > "...)
	return event.AppendAddrPort(b, t.Dst, t.Dport)
}
