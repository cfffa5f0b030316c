package event

import (
	"encoding/binary"
	"fmt"
)

// PointDrop is the drop point's value in enum nt_point, and its kinds'
// values are in enum nt_kind.
const (
	PointDrop Point = 5

	KindDrop Kind = 7 // the packet freed with a drop reason
)

// Drop is the payload of a drop event: where the kernel freed the packet,
// and why. The same in the narrow and the wide record.
type Drop struct {
	Location uint64 `nt:"location"` // kernel address that freed the packet
	Reason   uint32 `nt:"reason"`   // enum skb_drop_reason of the kernel that recorded it
	// The conntrack table of the drop's namespace, for a packet a netfilter
	// hook dropped before it had an entry, as user space read it after the
	// drop (ctstat): its entries and limit, and the packets conntrack's drop
	// counter counted since the reading before. Zero: not read.
	CTCount uint32 `nt:"ct_count,varint"`
	CTMax   uint32 `nt:"ct_max,varint"`
	CTDrops uint64 `nt:"ct_drops,varint"`
	// DstIfindex is the device the packet was routed to when it was freed,
	// DstMTU that device's MTU (zero: no route yet): a packet too big to
	// forward was too big for them. An MTU above 65535 reads 65535.
	DstIfindex uint32 `nt:"dst_ifindex,varint"`
	DstMTU     uint16 `nt:"dst_mtu,varint"`
	// For a packet too big to forward, as user space read them after the
	// drop (linkmtu): the MTU of the device under the route's device when
	// that is a tunnel, and of the sender's own device. Zero: not read.
	LowerMTU uint16 `nt:"lower_mtu,varint"`
	SrcMTU   uint16 `nt:"src_mtu,varint"`
}

// CTRead says whether the conntrack table was read for the drop.
func (d *Drop) CTRead() bool { return d.CTMax != 0 }

// dropBytesKept is how many of a dropped packet's first bytes its compact
// form keeps (the other points' keep none): a drop is the evidence of a
// failure, and what its headers say (its length, its TCP sequence, the
// MTU and the quoted packet of an ICMP error) is what explains some.
// Enough for an ICMPv6 error quoting an IPv6 header and 8 bytes more.
const dropBytesKept = 96

type dropSection struct{}

func (dropSection) appendCompact(b []byte, e *Event) []byte {
	b = dropSection{}.appendCompactFields(b, e)
	kept := e.Packet[:min(len(e.Packet), dropBytesKept)]
	return append(binary.AppendUvarint(b, uint64(len(kept))), kept...)
}

func (dropSection) readCompact(r *compactReader, e *Event) {
	dropSection{}.readCompactFields(r, e)
	if n := r.uvarint(); n > dropBytesKept {
		r.short = true
	} else if n > 0 {
		e.Packet = r.take(int(n))
	}
}

func (dropSection) name() string { return "drop" }

func (dropSection) journeyStep() bool { return false }

func (dropSection) kinds() []kindName { return []kindName{{KindDrop, "drop", DirectionNone}} }

func (dropSection) sample(base Event) Event {
	base.Point, base.Kind = PointDrop, KindDrop
	base.Drop = Drop{Location: 0xffffffff81000000, Reason: 31, CTCount: 512, CTMax: 512, CTDrops: 3,
		DstIfindex: 4, DstMTU: 1450, LowerMTU: 1500, SrcMTU: 1500}
	return base
}

// JSONDrop is a drop event's payload.
type JSONDrop struct {
	Reason   string `json:"reason"`
	Location string `json:"location"`
	// The namespace's conntrack table, read after a netfilter drop of a
	// packet without an entry (Drop).
	ConntrackCount uint32 `json:"conntrack_count,omitempty"`
	ConntrackMax   uint32 `json:"conntrack_max,omitempty"`
	ConntrackDrops uint64 `json:"conntrack_drops,omitempty"`
	// The device the packet was routed to and its MTU; for a packet too
	// big to forward, the MTUs of the device under it and of the sender's
	// device, read after the drop (Drop).
	RouteIfindex uint32 `json:"route_ifindex,omitempty"`
	RouteMTU     uint16 `json:"route_mtu,omitempty"`
	UnderlayMTU  uint16 `json:"underlay_mtu,omitempty"`
	SenderMTU    uint16 `json:"sender_mtu,omitempty"`
}

func (dropSection) Step(l Lookup, _ TranslationHooks, e *Event) string {
	s := "DROPPED " + l.ReasonName(e.Drop.Reason) + " at " + l.SymbolName(e.Drop.Location)
	if e.Drop.CTRead() {
		s += " " + conntrackTable(&e.Drop)
	}
	if tooBig(l, e) {
		s += " " + mtus(&e.Drop)
	}
	return s
}

func (dropSection) Detail(l Lookup, e *Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple), "dropped: "+l.ReasonName(e.Drop.Reason), "at "+l.SymbolName(e.Drop.Location))
	if e.Drop.CTRead() {
		detail = append(detail, conntrackTable(&e.Drop))
	}
	if tooBig(l, e) {
		detail = append(detail, mtus(&e.Drop))
	}
	return detail
}

// tooBig says whether a drop was of a packet too big for its route, whose
// MTUs tell why.
func tooBig(l Lookup, e *Event) bool {
	return l.ReasonName(e.Drop.Reason) == "PKT_TOO_BIG" && e.Drop.DstMTU != 0
}

// mtus tells the MTUs around a packet too big for its route.
func mtus(d *Drop) string {
	s := fmt.Sprintf("(route's device MTU %d", d.DstMTU)
	if d.LowerMTU != 0 {
		s += fmt.Sprintf(", under it %d", d.LowerMTU)
	}
	if d.SrcMTU != 0 {
		s += fmt.Sprintf(", the sender's %d", d.SrcMTU)
	}
	return s + ")"
}

// conntrackTable tells a drop's reading of its conntrack table.
func conntrackTable(d *Drop) string {
	return fmt.Sprintf("(conntrack table %d/%d, drops +%d)", d.CTCount, d.CTMax, d.CTDrops)
}

func (dropSection) JSONKey() string { return "drop" }

func (dropSection) JSONSchema() any { return (*JSONDrop)(nil) }

func (dropSection) AppendJSON(b []byte, l Lookup, e *Event) []byte {
	var p JSONObject
	b = p.Str(b, "reason", l.ReasonName(e.Drop.Reason))
	b = p.Str(b, "location", l.SymbolName(e.Drop.Location))
	b = p.UintOmit(b, "conntrack_count", uint64(e.Drop.CTCount))
	b = p.UintOmit(b, "conntrack_max", uint64(e.Drop.CTMax))
	b = p.UintOmit(b, "conntrack_drops", e.Drop.CTDrops)
	b = p.UintOmit(b, "route_ifindex", uint64(e.Drop.DstIfindex))
	b = p.UintOmit(b, "route_mtu", uint64(e.Drop.DstMTU))
	b = p.UintOmit(b, "underlay_mtu", uint64(e.Drop.LowerMTU))
	b = p.UintOmit(b, "sender_mtu", uint64(e.Drop.SrcMTU))
	return p.Close(b)
}

func (dropSection) PCAPNG(l Lookup, e *Event, c []string) []string {
	c = append(c, "drop_reason: "+l.ReasonName(e.Drop.Reason), "drop_location: "+l.SymbolName(e.Drop.Location))
	if e.Drop.CTRead() {
		c = append(c, "conntrack_table: "+conntrackTable(&e.Drop))
	}
	if tooBig(l, e) {
		c = append(c, "mtus: "+mtus(&e.Drop))
	}
	return c
}

func (dropSection) AppendJSONFields(b []byte, _ *JSONObject, _ *Event) []byte { return b }
