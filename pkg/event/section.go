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

// sections holds each point's section, indexed by the point.
var sections = [...]section{
	PointNAT:   natSection{},
	PointRoute: routeSection{},
	PointVXLAN: vxlanSection{},
	PointSYN:   synSection{},
	PointDrop:  dropSection{},
	PointDev:   devSection{},
	PointTCP:   tcpSection{},
}

// sectionOf returns a point's section; a point this build does not know
// (a newer recording's) has an empty payload.
func sectionOf(p Point) section {
	if int(p) < len(sections) && sections[p] != nil {
		return sections[p]
	}
	return devSection{}
}
