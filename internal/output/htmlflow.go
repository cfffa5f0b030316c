package output

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// HTMLFlows draws flows as sequence diagrams for the HTML page (HTMLPage):
// a lifeline per namespace the packets crossed, grouped by host; an arrow
// per move from one namespace to another; what a step did (a NAT with the
// tuple before and after, the rule that decided it, a drop and its reason)
// as a note on the lifeline where it happened. Retransmissions fold as a
// timeline folds them. It lays out what the report says and decides
// nothing: the same report gives the text and JSON.
type HTMLFlows struct {
	Names Names
	// All draws every flow, not only those with a finding (--timelines all).
	All bool
	// tl folds a packet that took an earlier one's path, as text does.
	tl timeline
}

// Copy returns an HTMLFlows with the same settings and buffers of its
// own, for another goroutine.
func (h *HTMLFlows) Copy() *HTMLFlows { return &HTMLFlows{Names: h.Names, All: h.All} }

// AppendFlow appends the flow's section of the page (its finding, and
// its diagram), or nothing for a flow not drawn.
func (h *HTMLFlows) AppendFlow(b []byte, f *flow.Flow, r *explain.Report) []byte {
	if !h.All && r.Finding == nil {
		return b
	}
	d := h.layout(f, r)
	var w bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&w, "flow", d); err != nil {
		// The template and its data are ours: an error is a bug.
		panic(fmt.Sprintf("html: drawing flow %d: %v", f.ID, err))
	}
	return append(b, w.Bytes()...)
}

// The diagram's geometry, in pixels.
const (
	laneWidth   = 250 // between two lifelines
	laneMargin  = 40  // left of the first lifeline
	headTop     = 8   // the host groups' boxes
	headHeight  = 56  // host and lifeline names
	lineHeight  = 15  // one line of a note
	rowGap      = 7   // between rows
	charWidth   = 6.7 // of the 11px monospace font, a little over
	noteLineMax = 96  // characters: a longer note wraps
)

// diagram is a flow laid out: what html.tmpl's "flow" draws.
type diagram struct {
	ID                   uint64
	Header               string
	Finding              *explain.Finding
	Rules                []string // the finding's netfilter rules, as the timeline shows them
	Hosts                []hostBox
	Lanes                []lane
	Rows                 []row
	Width, Height, Lower int // Lower: where the lifelines end
}

// hostBox is a host's group of lifelines.
type hostBox struct {
	Name    string
	X, Wide int
}

// lane is one lifeline: a namespace.
type lane struct {
	Name string
	X    int
}

// row is one element of the diagram, top to bottom.
type row struct {
	Kind string // packet, arrow, nat, drop, rule, note, end, same
	Y    int
	// From and To are the lifelines' x (an arrow's ends; a note's lifeline
	// is From), Left the lesser: where an arrow's words start.
	From, To, Left int
	// FromName and ToName name the lifelines, What is the row's words
	// unwrapped: what a reader of the page's DOM (a test) looks for.
	FromName, ToName, What string
	Lines                  []textLine
	Detail                 string // what hovering shows: the event's fields and times
	Wide, High             int    // the note's box
	Under                  int    // an arrow's y, under its words
	Mid                    int    // the middle of the box: a drop's cross, a packet's dot
	BoxX                   int    // where a note's box starts
}

// textLine is one line of a row's words, at its baseline y.
type textLine struct {
	Y    int
	Text string
}

// layout places a flow's packets and steps.
func (h *HTMLFlows) layout(f *flow.Flow, r *explain.Report) *diagram {
	d := &diagram{ID: f.ID, Finding: r.Finding, Header: string((&Text{names: h.Names}).appendHeader(nil, f, noColours))}
	if fd := r.Finding; fd != nil {
		for _, nr := range fd.NetfilterRules {
			d.Rules = append(d.Rules, nr.Step())
		}
	}
	lanes := h.lanes(d, f)
	y := headTop + headHeight + rowGap
	h.tl.newFlow()
	for i, p := range f.Packets {
		rp := &r.Packets[i]
		at := lanes[p.Events[0].Netns]
		if first := h.tl.sameAs(i, p, rp); first > 0 {
			text := fmt.Sprintf("%s at %s: same path as packet %d", packetName(rp), offset(p.Events[0].Time, f.Start), first)
			y = d.add(row{Kind: "same", From: at, To: at}, []string{text}, y)
			continue
		}
		y = h.packetRows(d, lanes, f, p, rp, i, y)
	}
	if f.Unkept > 0 {
		y = d.add(row{Kind: "note", From: d.Lanes[0].X, To: d.Lanes[0].X},
			[]string{fmt.Sprintf("... and %d events of later packets, not kept (--max-packets)", f.Unkept)}, y)
	}
	d.Lower = y
	d.Height = y + rowGap
	return d
}

// packetRows lays out one packet from y on: its name where it began, an
// arrow for each move between namespaces, a note for each step the
// timeline shows, and where it ended.
func (h *HTMLFlows) packetRows(d *diagram, lanes laneIndex, f *flow.Flow, p *flow.Packet, rp *explain.Packet, i, y int) int {
	at := lanes[p.Events[0].Netns]
	head := fmt.Sprintf("%d %s %s  %s", i+1, packetName(rp), tupleWords(rp.Tuple), offset(p.Events[0].Time, f.Start))
	y = d.add(row{Kind: "packet", From: at, To: at}, []string{head}, y)
	for k := range p.Events {
		e, s := &p.Events[k], &rp.Steps[k]
		moved := lanes[e.Netns] != at
		if moved {
			y = d.add(row{Kind: "arrow", From: at, To: lanes[e.Netns], Detail: h.detail(f, e, s.What)}, []string{arrowWords(e)}, y)
			at = lanes[e.Netns]
		}
		// A device entered is the arrow's, when one brought the packet.
		if !s.Shown || (moved && e.Point == event.PointDev) {
			continue
		}
		y = h.stepRows(d, f, e, s, at, y)
	}
	return d.add(row{Kind: "end", From: at, To: at, What: rp.TimelineEnd}, wrap("=> "+rp.TimelineEnd), y)
}

// stepRows lays out the note of one step the timeline shows, on the
// lifeline at x, with the netfilter rules that decided it.
func (h *HTMLFlows) stepRows(d *diagram, f *flow.Flow, e *event.Event, s *explain.Step, x, y int) int {
	kind := "note"
	switch {
	case s.Lost:
		kind = "drop"
	case e.Point == event.PointNAT && e.Translation() != 0:
		kind = "nat"
	}
	// The lifeline says where; the note says at which point, hook and
	// device, as the timeline's columns do.
	where := e.Point.String()
	if hook := e.Hook.String(); hook != "" {
		where += " " + hook
	}
	if dev := e.Ifname.String(); dev != "" {
		where += " " + dev
	}
	y = d.add(row{Kind: kind, From: x, To: x, What: s.Timeline, Detail: h.detail(f, e, s.What)}, wrap(where+": "+s.Timeline), y)
	for _, nr := range s.NATRules {
		y = d.add(row{Kind: "rule", From: x, To: x, What: nr.Step()}, wrap(nr.Step()), y)
	}
	if d.Finding == nil {
		return y
	}
	// The finding's rules at this step, but those drawn above already: a
	// NAT's rule is both the step's and the finding's.
	for _, nr := range d.Finding.NetfilterRules {
		drawn := func(x explain.NetfilterRule) bool { return x.Step() == nr.Step() }
		if nr.At == e.Time && nr.Netns == e.Netns && !slices.ContainsFunc(s.NATRules, drawn) {
			y = d.add(row{Kind: "rule", From: x, To: x, What: nr.Step()}, wrap(nr.Step()), y)
		}
	}
	return y
}

// add places a row of words at y and says where the next one goes; it
// widens the diagram to hold them.
func (d *diagram) add(r row, words []string, y int) int {
	r.Y, r.Left = y, min(r.From, r.To)
	r.FromName, r.ToName = d.laneName(r.From), d.laneName(r.To)
	if r.What == "" {
		r.What = strings.Join(words, " ")
	}
	longest := 0
	for i, w := range words {
		longest = max(longest, utf8.RuneCountInString(w))
		r.Lines = append(r.Lines, textLine{Y: y + (i+1)*lineHeight - 4, Text: w})
	}
	r.Wide, r.High = int(float64(longest)*charWidth)+12, len(words)*lineHeight+2
	r.Under, r.Mid = y+r.High+1, y+r.High/2
	// A note goes right of its lifeline, but for the last lifeline's,
	// which go left of it, over the lanes the flow came by: the diagram
	// keeps to the width its lanes need, and a lane's notes to one side.
	r.BoxX = r.From + 8
	if last := d.Lanes[len(d.Lanes)-1].X; r.Kind != "arrow" && r.From == last && len(d.Lanes) > 1 {
		r.BoxX = max(4, r.From-8-r.Wide)
	}
	right := r.BoxX + r.Wide
	if r.Kind == "arrow" {
		right = r.Left + 10 + r.Wide
	}
	d.Width = max(d.Width, right+laneMargin)
	d.Rows = append(d.Rows, r)
	if r.Kind == "arrow" {
		return r.Under + 4 + rowGap
	}
	return y + r.High + rowGap
}

// laneName names the lifeline at x.
func (d *diagram) laneName(x int) string {
	for _, l := range d.Lanes {
		if l.X == x {
			return l.Name
		}
	}
	return ""
}

// laneIndex finds a namespace's lifeline: its x.
type laneIndex map[uint32]int

// lanes makes a lifeline for each namespace the flow's packets crossed,
// in the order they first crossed it, grouped by host in the order the
// hosts were first crossed.
func (h *HTMLFlows) lanes(d *diagram, f *flow.Flow) laneIndex {
	var hosts []string
	byHost := map[string][]uint32{}
	for _, p := range f.Packets {
		for k := range p.Events {
			ns := p.Events[k].Netns
			host := h.host(ns)
			if _, ok := byHost[host]; !ok {
				hosts = append(hosts, host)
			}
			if !slices.Contains(byHost[host], ns) {
				byHost[host] = append(byHost[host], ns)
			}
		}
	}
	index := laneIndex{}
	x := laneMargin + laneWidth/2
	for _, host := range hosts {
		box := hostBox{Name: host, X: x - laneWidth/2 + 4}
		for _, ns := range byHost[host] {
			index[ns] = x
			name := strings.TrimPrefix(h.Names.netns(ns), host+":") // the host's box names it
			d.Lanes = append(d.Lanes, lane{Name: name, X: x})
			x += laneWidth
		}
		box.Wide = x - laneWidth/2 - 4 - box.X
		d.Hosts = append(d.Hosts, box)
	}
	d.Width = x - laneWidth/2 + laneMargin
	return index
}

// host is the host a namespace is on; "" when there is one.
func (h *HTMLFlows) host(ns uint32) string {
	if h.Names.Host == nil {
		return ""
	}
	return h.Names.Host(ns)
}

// detail is what hovering over a step shows: its time, place, point and
// hook, what it did in full, and the event's fields.
func (h *HTMLFlows) detail(f *flow.Flow, e *event.Event, what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n", offset(e.Time, f.Start), h.Names.wall(e.Time).Format("15:04:05.000000 MST"))
	b.WriteString(h.Names.netns(e.Netns))
	if dev := e.Ifname.String(); dev != "" {
		b.WriteString("/" + dev)
	}
	b.WriteString("  " + e.Point.String())
	if hook := e.Hook.String(); hook != "" {
		b.WriteString(" " + hook)
	}
	b.WriteString("\n" + what)
	if words := event.ViewOf(e.Point).Detail(h.Names.lookup(), e, nil); len(words) > 0 {
		b.WriteString("\n" + strings.Join(words, " "))
	}
	if e.HasCT() {
		fmt.Fprintf(&b, "\nconntrack entry %#x", e.CT.ID)
	}
	return b.String()
}

// packetName is "SYN (request)".
func packetName(rp *explain.Packet) string { return rp.Label + " (" + rp.Direction + ")" }

// tupleWords is "10.0.0.1:40000 -> 10.96.0.10:80".
func tupleWords(t event.Tuple) string {
	return string(appendAddrPorts(nil, t))
}

// arrowWords labels a move: the device entered and the packet's tuple
// there, with the tunnel's for an encapsulated packet.
func arrowWords(e *event.Event) string {
	s := tupleWords(e.Entered())
	if e.HasInner() {
		s += " in " + event.ProtoName(e.Tuple.Proto) + " " + tupleWords(e.Tuple)
	}
	if dev := e.Ifname.String(); dev != "" {
		s = dev + ": " + s
	}
	return s
}

// offset is a time from the flow's start, as the timeline writes it.
func offset(at, start uint64) string { return string(appendOffset(nil, at, start, 0)) }

// wrap breaks a note into lines of at most noteLineMax characters, at
// spaces where it can.
func wrap(s string) []string {
	var lines []string
	for len(s) > noteLineMax {
		cut := strings.LastIndexByte(s[:noteLineMax], ' ')
		if cut < noteLineMax/2 {
			cut = noteLineMax
		}
		lines = append(lines, s[:cut])
		s = strings.TrimLeft(s[cut:], " ")
	}
	return append(lines, s)
}
