package event

import (
	"fmt"
	"net/netip"
	"strconv"
)

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

func (routeSection) decode(e *Event, p []byte, l *layout, ipv6 bool) {
	o := routeAt[l.form]
	e.Route.Oif = le.Uint32(p[o.oif:])
	e.Route.Err = int32(le.Uint32(p[o.err:]))
	e.Route.Gateway = l.addr(p[o.gateway:], ipv6)
	e.Route.Src = l.addr(p[o.saddr:], ipv6)
	e.Route.Table = le.Uint32(p[o.table:])
	copy(e.Route.OifName[:], p[o.oifname:o.oifname+16])
}

func (routeSection) encode(e *Event, p []byte) {
	o := routeAt[formNarrow]
	le.PutUint32(p[o.oif:], e.Route.Oif)
	putAddr4(p[o.gateway:o.gateway+4], e.Route.Gateway)
	putAddr4(p[o.saddr:o.saddr+4], e.Route.Src)
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

func (routeSection) journeyStep() bool { return true }

func (routeSection) kinds() []kindName {
	return []kindName{{KindRouteLookup, "lookup", DirectionNone}, {KindReroute, "reroute", DirectionNone}}
}

func (routeSection) sample(base Event) Event {
	base.Point, base.Kind = PointRoute, KindRouteLookup
	base.Route = Route{Oif: 2, Gateway: netip.MustParseAddr("10.244.2.0"), Src: base.Tuple.Src, Err: -113, Table: 254}
	copy(base.Route.OifName[:], "eth0")
	return base
}

// JSONRoute is a route event's payload.
type JSONRoute struct {
	Dev     string `json:"dev"`
	Ifindex uint32 `json:"ifindex"`
	Gateway string `json:"gateway,omitempty"`
	Src     string `json:"src,omitempty"`
	Err     int32  `json:"err"`
	Table   uint32 `json:"table,omitempty"`
}

func (routeSection) Step(_ Lookup, _ TranslationHooks, e *Event) string {
	s := "route via " + e.Route.OifName.String()
	if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
		s += " gw " + g.String()
	}
	if e.Route.Err != 0 {
		s += fmt.Sprintf(" (error %d)", e.Route.Err)
	}
	return s
}

func (routeSection) Detail(_ Lookup, e *Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple), "via "+e.Route.OifName.String())
	if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
		detail = append(detail, "gw "+g.String())
	}
	if e.Route.Err != 0 {
		detail = append(detail, fmt.Sprintf("err %d", e.Route.Err))
	}
	return detail
}

func (routeSection) JSONKey() string { return "route" }

func (routeSection) JSONSchema() any { return (*JSONRoute)(nil) }

func (routeSection) AppendJSON(b []byte, _ Lookup, e *Event) []byte {
	var p JSONObject
	b = p.Str(b, "dev", e.Route.OifName.String())
	b = p.Uint(b, "ifindex", uint64(e.Route.Oif))
	if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
		b = p.Str(b, "gateway", g.String())
	}
	if s := e.Route.Src; s.IsValid() && !s.IsUnspecified() {
		b = p.Str(b, "src", s.String())
	}
	b = strconv.AppendInt(p.Key(b, "err"), int64(e.Route.Err), 10)
	b = p.UintOmit(b, "table", uint64(e.Route.Table))
	return p.Close(b)
}

func (routeSection) PCAPNG(_ Lookup, _ *Event, c []string) []string { return c }

func (routeSection) AppendJSONFields(b []byte, _ *JSONObject, _ *Event) []byte { return b }
