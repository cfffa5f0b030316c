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
	Oif     uint32     `nt:"oif"`
	OifName Name       `nt:"oifname"`
	Gateway netip.Addr `nt:"gateway"`
	Src     netip.Addr `nt:"saddr"`
	Err     int32      `nt:"err"`
	Table   uint32     `nt:"table"`
}

type routeSection struct{}

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
