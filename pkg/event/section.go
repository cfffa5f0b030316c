package event

import "net/netip"

// A section is one point's payload: the part of an event after the fields
// every event has. Each point's section is one file (section_<point>.go)
// holding its payload type and registered in sections: how kernel records
// (narrow and wide) and recordings keep it, its compact form, its
// addresses beyond the tuples (which a recording's IPv6 block carries),
// and a sample event that the tests round-trip through every form.
type section interface {
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
	// sample is base made an event of the point, every payload field set.
	sample(base Event) Event
}

// payloadAddrs is how many addresses a payload may hold.
const payloadAddrs = 2

// setAddrOfPair is setAddr for a payload whose addresses are two fields.
func setAddrOfPair(i int, a netip.Addr, first, second *netip.Addr) {
	if i == 0 {
		*first = a
	} else {
		*second = a
	}
}

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
// event. TestEveryPointHasASection checks that each covers every point.

func decodeSection(e *Event, p []byte, l *layout, ipv6 bool) {
	switch e.Point {
	case PointNAT:
		natSection{}.decode(e, p, l, ipv6)
	case PointRoute:
		routeSection{}.decode(e, p, l, ipv6)
	case PointVXLAN:
		vxlanSection{}.decode(e, p, l, ipv6)
	case PointSYN:
		synSection{}.decode(e, p, l, ipv6)
	case PointDrop:
		dropSection{}.decode(e, p, l, ipv6)
	case PointTCP:
		tcpSection{}.decode(e, p, l, ipv6)
	}
}

func encodeSection(e *Event, p []byte) {
	switch e.Point {
	case PointNAT:
		natSection{}.encode(e, p)
	case PointRoute:
		routeSection{}.encode(e, p)
	case PointVXLAN:
		vxlanSection{}.encode(e, p)
	case PointSYN:
		synSection{}.encode(e, p)
	case PointDrop:
		dropSection{}.encode(e, p)
	case PointTCP:
		tcpSection{}.encode(e, p)
	}
}

func appendCompactSection(b []byte, e *Event) []byte {
	switch e.Point {
	case PointNAT:
		return natSection{}.appendCompact(b, e)
	case PointRoute:
		return routeSection{}.appendCompact(b, e)
	case PointVXLAN:
		return vxlanSection{}.appendCompact(b, e)
	case PointSYN:
		return synSection{}.appendCompact(b, e)
	case PointDrop:
		return dropSection{}.appendCompact(b, e)
	case PointTCP:
		return tcpSection{}.appendCompact(b, e)
	}
	return b
}

func readCompactSection(r *compactReader, e *Event) {
	switch e.Point {
	case PointNAT:
		natSection{}.readCompact(r, e)
	case PointRoute:
		routeSection{}.readCompact(r, e)
	case PointVXLAN:
		vxlanSection{}.readCompact(r, e)
	case PointSYN:
		synSection{}.readCompact(r, e)
	case PointDrop:
		dropSection{}.readCompact(r, e)
	case PointTCP:
		tcpSection{}.readCompact(r, e)
	}
}

func sectionAddrs(e *Event) (a [payloadAddrs]netip.Addr) {
	switch e.Point {
	case PointNAT:
		return natSection{}.addrs(e)
	case PointRoute:
		return routeSection{}.addrs(e)
	case PointVXLAN:
		return vxlanSection{}.addrs(e)
	case PointSYN:
		return synSection{}.addrs(e)
	}
	return a
}

func setSectionAddr(e *Event, i int, a netip.Addr) {
	switch e.Point {
	case PointNAT:
		natSection{}.setAddr(e, i, a)
	case PointRoute:
		routeSection{}.setAddr(e, i, a)
	case PointVXLAN:
		vxlanSection{}.setAddr(e, i, a)
	case PointSYN:
		synSection{}.setAddr(e, i, a)
	}
}
