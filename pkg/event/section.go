package event

import "net/netip"

// A section is one point's payload: the part of an event after the fields
// every event has. Each point's section is one file (section_<point>.go)
// holding its payload type and registered in sections: its name, kinds
// and a sample event that the tests round-trip through every form, and
// how the renderers show it (View). How kernel records (narrow and wide)
// and recordings keep the payload, its compact form and its addresses
// beyond the tuples (which a recording's IPv6 block carries) are generated
// from the payload type's nt tags (section_codec.go, codecgen).
type section interface {
	View
	// decode reads the payload p of a record of layout l; ipv6 is the
	// family of the event's tuple, which the payload's addresses share.
	decode(e *Event, p []byte, l *layout, ipv6 bool)
	// encode writes the payload of a narrow record (a recording's).
	encode(e *Event, p []byte)
	appendCompact(b []byte, e *Event) []byte
	readCompact(r *compactReader, e *Event)
	// addrs are the payload's addresses, at most payloadAddrs (invalid
	// past those it has); setAddr sets the i-th.
	addrs(e *Event) [payloadAddrs]netip.Addr
	setAddr(e *Event, i int, a netip.Addr)
	// name is the point's, in output and recordings' metadata.
	name() string
	// journeyStep says whether the point's events are steps of a packet's
	// way, which share the bytes of the journey they join (the kernel's
	// nt_journeys_point).
	journeyStep() bool
	// kinds are the point's kinds.
	kinds() []kindName
	// sample is base made an event of the point, every payload field set.
	sample(base Event) Event
}

// kindName is one of a point's kinds, its name in output and which way
// its packet passes the event's device (DirectionNone for most).
type kindName struct {
	kind Kind
	name string
	dir  Direction
}

// Direction is which way a kind's packet passes the device its event
// names: pcapng flags the packet with it.
type Direction uint8

const (
	DirectionNone     Direction = iota // not a device's packet, or either way
	DirectionInbound                   // received
	DirectionOutbound                  // sent
)

// payloadAddrs is how many addresses a payload may hold.
const payloadAddrs = 2

// sections holds each point's section, indexed by the point: the
// registry the tests check every point against.
var sections = [...]section{
	PointNAT:   natSection{},
	PointRoute: routeSection{},
	PointVXLAN: vxlanSection{},
	PointSYN:   synSection{},
	PointDrop:  dropSection{},
	PointDev:   devSection{},
	PointTCP:   tcpSection{},
}

// The section operations on the hot paths dispatch on the point in a
// switch of concrete calls, not through the sections table: a call through
// an interface makes the compiler move its arguments to the heap (the
// event, the compact buffer, the reader), which costs an allocation per
// event. sectiongen writes those switches (section_dispatch.go, one
// function per operation taking the event, named <operation>Section) from
// this registry; TestDispatchIsCurrent fails while they are not.
//go:generate go run ./internal/sectiongen -in section.go -out section_dispatch.go
//go:generate go run ./internal/codecgen -obj ../../internal/probe/nat_x86_bpfel.o -out section_codec.go

// emptySection is a section without payload: the dev point's, and the
// dispatch's for a point the registry lacks (a damaged recording's).
type emptySection struct{}

func (emptySection) decode(*Event, []byte, *layout, bool)      {}
func (emptySection) encode(*Event, []byte)                     {}
func (emptySection) appendCompact(b []byte, _ *Event) []byte   { return b }
func (emptySection) readCompact(*compactReader, *Event)        {}
func (emptySection) addrs(*Event) (a [payloadAddrs]netip.Addr) { return a }
func (emptySection) setAddr(*Event, int, netip.Addr)           {}
