// Package event is nettrace's event model: what one observation in the
// kernel says about one packet, decoded from the records the BPF programs
// write (bpf/include/nettrace.h). Everything downstream (flows,
// explanations, recordings, output) consumes these values. A point is one
// unit here: its section's file holds its payload, the payload's forms and
// how renderers show it (View).
package event

import (
	"fmt"
	"net/netip"
)

// Point is an observation point: where in the kernel an event was seen.
// Each point's value, with its kinds', is declared in its section's file
// (section_<point>.go); internal/probe's TestEnumsMatchBPF holds them to
// enum nt_point and enum nt_kind.
type Point uint8

// Points lists every observation point with a section (the sections
// registry), in the order of their values, which is the order they are
// reported in.
var Points = registeredPoints()

func registeredPoints() []Point {
	var points []Point
	for p, s := range sections {
		if s != nil {
			points = append(points, Point(p))
		}
	}
	return points
}

func (p Point) String() string {
	if int(p) < len(sections) && sections[p] != nil {
		return sections[p].name()
	}
	return fmt.Sprintf("point(%d)", uint8(p))
}

// Kind says what an event reports, within its point. Its values are
// numbered across points (enum nt_kind).
type Kind uint8

// kinds holds each kind's name and direction, from its point's section.
var kinds = registeredKinds()

func registeredKinds() (kinds [256]kindName) {
	for _, s := range sections {
		if s == nil {
			continue
		}
		for _, k := range s.kinds() {
			kinds[k.kind] = k
		}
	}
	return kinds
}

func (k Kind) String() string {
	if n := kinds[k].name; n != "" {
		return n
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Direction is which way the kind's packet passes the event's device.
func (k Kind) Direction() Direction { return kinds[k].dir }

// Hook is a netfilter IPv4 hook number, or HookNone.
type Hook uint8

// Netfilter hooks (enum nf_inet_hooks).
const (
	HookPrerouting  Hook = 0
	HookInput       Hook = 1
	HookForward     Hook = 2
	HookOutput      Hook = 3
	HookPostrouting Hook = 4
	HookNone        Hook = 0xff
)

var hookNames = [...]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

func (h Hook) String() string {
	if int(h) < len(hookNames) {
		return hookNames[h]
	}
	return ""
}

// Flags of Event.
const (
	FlagInner = 0x01 // Inner is the tuple inside a vxlan encapsulation
	FlagCT    = 0x02 // CT is the packet's conntrack entry
	FlagPre   = 0x04 // NAT.Pre is known
	FlagGroup = 0x08 // received as a link-layer broadcast or multicast
	// FlagCTInvalid: on a nat event, conntrack ran at the hook and left the
	// packet without an entry: it judged it INVALID, and NAT let it pass as
	// it came.
	FlagCTInvalid = 0x20
)

// IP protocol numbers used in tuples.
const (
	ProtoICMP   = 1
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoICMPv6 = 58
)

// Tuple is a packet's IPv4 addresses, ports and protocol. For ICMP, Sport
// is type<<8|code and Dport the echo id.
type Tuple struct {
	Src      netip.Addr
	Dst      netip.Addr
	Sport    uint16
	Dport    uint16
	Proto    uint8
	TCPFlags uint8
}

// Multicast says whether the packet goes to a group or to everyone: such a
// packet has no reply, and no connection joins it to another.
func (t Tuple) Multicast() bool {
	return t.Dst.IsMulticast() || t.Dst == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// Reverse returns the tuple of the packet going the other way.
func (t Tuple) Reverse() Tuple {
	return Tuple{Src: t.Dst, Dst: t.Src, Sport: t.Dport, Dport: t.Sport, Proto: t.Proto}
}

// Conntrack is the conntrack entry a packet belongs to.
type Conntrack struct {
	ID     uint64 // the entry's kernel address: stable while the entry lives
	Status CTStatus
	Mark   uint32
	Zone   uint16
	Info   uint8 // enum ip_conntrack_info: 0 established, 1 related, 2 new, >= 3 reply
	Orig   Tuple
	Reply  Tuple
}

// ctInfoUntracked is IP_CT_UNTRACKED: the packet is exempt from tracking
// and _nfct points at a shared placeholder entry.
const ctInfoUntracked = 7

// IP_CT_RELATED and IP_CT_NEW: the packet created its entry.
const (
	ctInfoRelated = 1
	ctInfoNew     = 2
)

// Created says whether the packet created its entry (the first packet of
// a connection, or of one related to it): only such a packet carries an
// entry conntrack has yet to confirm.
func (c Conntrack) Created() bool { return c.Info == ctInfoNew || c.Info == ctInfoRelated }

// IsReply says whether the packet travels in the reply direction.
func (c Conntrack) IsReply() bool { return c.Info >= 3 && c.Info != ctInfoUntracked }

// Identifies says whether the entry names one connection: a template
// (attached by the raw table's CT target before tracking) and the
// untracked placeholder are shared by many.
func (c Conntrack) Identifies() bool {
	return c.ID != 0 && c.Info != ctInfoUntracked && c.Status&CTTemplate == 0
}

// Name is a kernel device name: fixed size, so decoding does not allocate.
type Name [16]byte

func (n Name) String() string { return string(n.AppendTo(nil)) }

// AppendTo appends the name to b.
func (n *Name) AppendTo(b []byte) []byte {
	for i, c := range n {
		if c == 0 {
			return append(b, n[:i]...)
		}
	}
	return append(b, n[:]...)
}

// Event is one observation of one packet (or socket) in the kernel.
type Event struct {
	Time uint64 // CLOCK_MONOTONIC nanoseconds
	// Skb is the packet's skb address and SkbSeen when that address was
	// first seen holding it: together, the packet's identity. The address
	// alone is recycled as soon as the packet is freed. SkbSeen is zero in
	// recordings made before it existed.
	Skb     uint64
	SkbSeen uint64
	Netns   uint32 // network namespace inode
	Ifindex uint32
	Point   Point
	Kind    Kind
	Hook    Hook
	Flags   uint8
	CPU     uint32
	Ifname  Name
	Tuple   Tuple
	Inner   Tuple
	CT      Conntrack
	// Packet is the start of the packet from its IP header (the snap
	// length), when the point captured it. It refers to the buffer the event
	// was decoded from: copy it to keep it.
	Packet []byte

	NAT   NAT
	Route Route
	VXLAN VXLAN
	SYN   SYN
	Drop  Drop
	TCP   TCP
}

// HasCT says whether the event carries a conntrack entry.
func (e *Event) HasCT() bool { return e.Flags&FlagCT != 0 }

// ToGroup says whether the packet went to a group or to everyone
// (multicast, or broadcast by address or on the link): it has no reply.
func (e *Event) ToGroup() bool {
	t := e.Tuple
	if e.HasInner() {
		t = e.Inner
	}
	return e.Flags&FlagGroup != 0 || t.Multicast()
}

// HasInner says whether the event carries an encapsulated tuple.
func (e *Event) HasInner() bool { return e.Flags&FlagInner != 0 }

// Current is the packet's tuple at the event: the inner one of an
// encapsulated packet (the connection's, not the tunnel's).
func (e *Event) Current() Tuple {
	if e.HasInner() {
		return e.Inner
	}
	return e.Tuple
}

// Entered is the tuple the packet came to the event's point with: as
// Current, but before the translation for a nat event that knows it. It
// names the packet's connection the way its earlier steps saw it.
func (e *Event) Entered() Tuple {
	if e.HasInner() {
		return e.Inner
	}
	if e.Point == PointNAT && e.Flags&FlagPre != 0 {
		return e.NAT.Pre
	}
	return e.Tuple
}
