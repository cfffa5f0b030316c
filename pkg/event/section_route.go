package event

import "net/netip"

// PointRoute is the route point's value in enum nt_point, and its kinds'
// values are in enum nt_kind.
const (
	PointRoute Point = 2

	KindRouteLookup Kind = 2 // a FIB lookup made for a followed packet
	KindReroute     Kind = 3 // ip_route_me_harder returned
)

// Route is the payload of a route event: a FIB lookup made for a followed
// packet, or the re-route after NAT.
type Route struct {
	Oif     uint32
	OifName Name
	Gateway netip.Addr
	Src     netip.Addr
	Err     int32
	Table   uint32
}

type routeSection struct{}

// routeOffsets are where struct nt_route keeps its fields, in the narrow
// record and the wide one.
var routeOffsets = [forms]struct{ oif, err, gateway, src, table, oifname int }{
	formNarrow: {oif: 0, gateway: 4, src: 8, err: 12, table: 16, oifname: 24},
	formWide:   {oif: 0, err: 4, gateway: 8, src: 24, table: 40, oifname: 48},
}

func (routeSection) decode(e *Event, p []byte, l *layout, ipv6 bool) {
	o := routeOffsets[l.form]
	e.Route.Oif = le.Uint32(p[o.oif:])
	e.Route.Err = int32(le.Uint32(p[o.err:]))
	e.Route.Gateway = l.addr(p[o.gateway:], ipv6)
	e.Route.Src = l.addr(p[o.src:], ipv6)
	e.Route.Table = le.Uint32(p[o.table:])
	copy(e.Route.OifName[:], p[o.oifname:o.oifname+16])
}

func (routeSection) encode(e *Event, p []byte) {
	o := routeOffsets[formNarrow]
	le.PutUint32(p[o.oif:], e.Route.Oif)
	putAddr4(p[o.gateway:o.gateway+4], e.Route.Gateway)
	putAddr4(p[o.src:o.src+4], e.Route.Src)
	le.PutUint32(p[o.err:], uint32(e.Route.Err))
	le.PutUint32(p[o.table:], e.Route.Table)
	copy(p[o.oifname:o.oifname+16], e.Route.OifName[:])
}

func (routeSection) appendCompact(b []byte, e *Event) []byte {
	b = le.AppendUint32(b, e.Route.Oif)
	b = appendName(b, &e.Route.OifName)
	b = appendAddr(b, e.Route.Gateway)
	b = appendAddr(b, e.Route.Src)
	b = le.AppendUint32(b, uint32(e.Route.Err))
	return le.AppendUint32(b, e.Route.Table)
}

func (routeSection) readCompact(r *compactReader, e *Event) {
	e.Route.Oif = r.u32()
	r.name(&e.Route.OifName)
	e.Route.Gateway, e.Route.Src = r.addr(), r.addr()
	e.Route.Err, e.Route.Table = int32(r.u32()), r.u32()
}

func (routeSection) addrs(e *Event) [payloadAddrs]netip.Addr {
	return [payloadAddrs]netip.Addr{e.Route.Gateway, e.Route.Src}
}

func (routeSection) setAddr(e *Event, i int, a netip.Addr) {
	setAddrOfPair(i, a, &e.Route.Gateway, &e.Route.Src)
}

func (routeSection) name() string { return "route" }

func (routeSection) kinds() []kindName {
	return []kindName{{KindRouteLookup, "lookup"}, {KindReroute, "reroute"}}
}

func (routeSection) sample(base Event) Event {
	base.Point, base.Kind = PointRoute, KindRouteLookup
	base.Route = Route{Oif: 2, Gateway: netip.MustParseAddr("10.244.2.0"), Src: base.Tuple.Src, Err: -113, Table: 254}
	copy(base.Route.OifName[:], "eth0")
	return base
}
