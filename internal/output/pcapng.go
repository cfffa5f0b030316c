package output

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
)

// exporter writes the packets of a stream as pcapng: one interface per
// namespace and device, named "netns/dev"; per packet the direction, a
// packet id shared by every state of one packet, and comments carrying
// nettrace's metadata as "key: value" (in Wireshark: frame.comment ==
// "drop_reason: IP_RPFILTER"): the event's, its point's (its view's
// pcapng), then the netfilter rules its flow's report names for it.
type exporter struct {
	w      *pcapgo.NgWriter
	names  Names
	ifaces map[string]int
	notes  StepNotes
}

// EventSource gives events in order, io.EOF after the last.
type EventSource interface {
	Next(e *event.Event) error
}

// StepKey names one event of a recording across its readings. It is 32
// bytes, the namespace, point, kind and hook in one word: the export keeps
// one per packet step of a recording.
type StepKey struct {
	time, skb, skbSeen uint64
	where              uint64
}

// StepOf is the key of an event.
func StepOf(e *event.Event) StepKey {
	return StepKey{e.Time, e.Skb, e.SkbSeen, uint64(e.Netns)<<32 | uint64(e.Point)<<16 | uint64(e.Kind)<<8 | uint64(e.Hook)}
}

// StepNotes are what the reports of a recording's flows say of their
// packets' steps.
type StepNotes struct {
	// Packets are the id of each step's packet (explain.Packet.ID).
	Packets map[StepKey]uint64
	// NATRules are the netfilter rules that decided a NAT step.
	NATRules map[StepKey][]explain.NetfilterRule
}

// ExportPcapng writes the packets of a recording (events that carry packet
// bytes) to out, in its order, each with the id and NAT rules its flow's
// report gave its step, and returns how many it wrote. A packet no flow
// kept (past a flow's packet cap) has no id.
func ExportPcapng(s EventSource, names Names, notes StepNotes, out io.Writer) (int, error) {
	w, err := pcapgo.NewNgWriterInterface(out, pcapgo.NgInterface{Name: "nettrace", LinkType: layers.LinkTypeRaw, SnapLength: 65535},
		pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "nettrace", Comment: "exported by nettrace from a recording"}})
	if err != nil {
		return 0, fmt.Errorf("write pcapng: %w", err)
	}
	x := &exporter{w: w, names: names, ifaces: map[string]int{}, notes: notes}
	n := 0
	var e event.Event
	for {
		err := s.Next(&e)
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		if len(e.Packet) == 0 {
			continue
		}
		if err := x.packet(&e); err != nil {
			return n, err
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return n, fmt.Errorf("write pcapng: %w", err)
	}
	return n, nil
}

// ruleComments are the comments naming the rules that decided a NAT step
// (netfilter_rule) and the one a RETURN kept it from
// (netfilter_rule_not_reached).
func ruleComments(rules []explain.NetfilterRule) []string {
	var c []string
	for _, r := range rules {
		switch r.Role {
		case explain.RoleDecided:
			c = append(c, "netfilter_rule: "+ruleComment(r))
		case explain.RoleSkipped:
			c = append(c, "netfilter_rule_not_reached: "+ruleComment(r))
		}
	}
	return c
}

// ruleComment names a rule, or the chain's policy when no rule decided.
func ruleComment(r explain.NetfilterRule) string {
	if r.Position == 0 {
		return fmt.Sprintf("%s %s policy", r.Table, r.Hook)
	}
	return fmt.Sprintf("%s %s rule %d: %s", r.Table, r.Chain, r.Position, r.Text)
}

func (x *exporter) iface(e *event.Event) (int, error) {
	name := x.names.netns(e.Netns)
	if d := e.Ifname.String(); d != "" {
		name += "/" + d
	}
	if id, ok := x.ifaces[name]; ok {
		return id, nil
	}
	id, err := x.w.AddInterface(pcapgo.NgInterface{Name: name, LinkType: layers.LinkTypeRaw, SnapLength: 65535,
		Description: "network namespace " + x.names.netns(e.Netns)})
	if err != nil {
		return 0, fmt.Errorf("write pcapng: %w", err)
	}
	x.ifaces[name] = id
	return id, nil
}

func (x *exporter) packet(e *event.Event) error {
	id, err := x.iface(e)
	if err != nil {
		return err
	}
	length := max(len(e.Packet), ipLength(e.Packet))
	step := StepOf(e)
	opts := pcapgo.NgPacketOptions{Comments: x.comments(e, x.notes.NATRules[step])}
	if id, ok := x.notes.Packets[step]; ok {
		opts.PacketID = &id
	}
	switch e.Kind.Direction() {
	case event.DirectionInbound:
		opts.Flags = &pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionInbound}
	case event.DirectionOutbound:
		opts.Flags = &pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionOutbound}
	}
	ci := gopacket.CaptureInfo{Timestamp: x.names.wall(e.Time), CaptureLength: len(e.Packet), Length: length, InterfaceIndex: id}
	if err := x.w.WritePacketWithOptions(ci, e.Packet, opts); err != nil {
		return fmt.Errorf("write pcapng: %w", err)
	}
	return nil
}

// ipLength is the length of the packet whose first bytes b are, from its
// IP header (0: unknown).
func ipLength(b []byte) int {
	switch {
	case len(b) >= 4 && b[0]>>4 == 4:
		return int(binary.BigEndian.Uint16(b[2:]))
	case len(b) >= 6 && b[0]>>4 == 6:
		return 40 + int(binary.BigEndian.Uint16(b[4:]))
	}
	return 0
}

func (x *exporter) comments(e *event.Event, rules []explain.NetfilterRule) []string {
	c := []string{"point: " + e.Point.String(), "kind: " + e.Kind.String(), "netns: " + x.names.netns(e.Netns)}
	if e.Hook != event.HookNone {
		c = append(c, "hook: "+e.Hook.String())
	}
	c = append(c, "tuple: "+event.CommentTuple(e.Tuple))
	if e.HasInner() {
		c = append(c, "inner: "+event.CommentTuple(e.Inner))
	}
	if e.HasCT() {
		c = append(c, fmt.Sprintf("ct: %#x", e.CT.ID), "ct_status: "+strings.Join(e.CT.Status.Names(), ","))
	}
	c = event.ViewOf(e.Point).PCAPNG(x.names.lookup(), e, c)
	return append(c, ruleComments(rules)...)
}
