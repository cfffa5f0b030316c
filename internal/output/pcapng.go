package output

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// exporter writes the packets of a stream as pcapng: one interface per
// namespace and device, named "netns/dev"; per packet the direction, a
// packet id shared by every state of one packet, and comments carrying
// nettrace's metadata as "key: value" (in Wireshark: frame.comment ==
// "drop_reason: IP_RPFILTER"): the event's, then its point's (its view's
// pcapng).
type exporter struct {
	w      *pcapgo.NgWriter
	names  Names
	ifaces map[string]int
	epochs map[uint64]uint64
}

// EventSource gives events in order, io.EOF after the last.
type EventSource interface {
	Next(e *event.Event) error
}

// ExportPcapng writes the packets of s (events that carry packet bytes)
// to out, and returns how many it wrote.
func ExportPcapng(s EventSource, names Names, out io.Writer) (int, error) {
	w, err := pcapgo.NewNgWriterInterface(out, pcapgo.NgInterface{Name: "nettrace", LinkType: layers.LinkTypeRaw, SnapLength: 65535},
		pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "nettrace", Comment: "exported by nettrace from a recording"}})
	if err != nil {
		return 0, fmt.Errorf("write pcapng: %w", err)
	}
	x := &exporter{w: w, names: names, ifaces: map[string]int{}, epochs: map[uint64]uint64{}}
	n := 0
	var e event.Event
	for {
		err := s.Next(&e)
		if err == io.EOF {
			break
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
	// One packet, one id, across its states; a freed skb's address starts
	// a new packet.
	pid := e.Skb ^ x.epochs[e.Skb]<<56
	if e.Point == event.PointDrop {
		x.epochs[e.Skb]++
	}
	opts := pcapgo.NgPacketOptions{PacketID: &pid, Comments: x.comments(e)}
	switch e.Kind {
	case event.KindDevRx:
		opts.Flags = &pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionInbound}
	case event.KindDevTx, event.KindVXLANEncap:
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

// pcapngTuple is a tuple in a comment: "tcp 10.0.0.1:40000 -> 10.96.0.10:80".
func pcapngTuple(t event.Tuple) string {
	return fmt.Sprintf("%s %s -> %s", event.ProtoName(t.Proto), netip.AddrPortFrom(t.Src, t.Sport), netip.AddrPortFrom(t.Dst, t.Dport))
}

func (x *exporter) comments(e *event.Event) []string {
	c := []string{"point: " + e.Point.String(), "kind: " + e.Kind.String(), "netns: " + x.names.netns(e.Netns)}
	if e.Hook != event.HookNone {
		c = append(c, "hook: "+e.Hook.String())
	}
	c = append(c, "tuple: "+pcapngTuple(e.Tuple))
	if e.HasInner() {
		c = append(c, "inner: "+pcapngTuple(e.Inner))
	}
	if e.HasCT() {
		c = append(c, fmt.Sprintf("ct: %#x", e.CT.ID), "ct_status: "+strings.Join(e.CT.Status.Names(), ","))
	}
	return viewOf(e.Point).pcapng(x.names, e, c)
}
