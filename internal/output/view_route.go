package output

import (
	"fmt"
	"strconv"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// routeView shows the route point: a FIB lookup for a followed packet, or the re-route after NAT.
type routeView struct{}

// JSONRoute is a route event's payload.
type JSONRoute struct {
	Dev     string `json:"dev"`
	Ifindex uint32 `json:"ifindex"`
	Gateway string `json:"gateway,omitempty"`
	Src     string `json:"src,omitempty"`
	Err     int32  `json:"err"`
	Table   uint32 `json:"table,omitempty"`
}

func (routeView) step(_ Names, _ *flow.Flow, e *event.Event) string {
	s := "route via " + e.Route.OifName.String()
	if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
		s += " gw " + g.String()
	}
	if e.Route.Err != 0 {
		s += fmt.Sprintf(" (error %d)", e.Route.Err)
	}
	return s
}

func (routeView) detail(_ Names, e *event.Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple), "via "+e.Route.OifName.String())
	if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
		detail = append(detail, "gw "+g.String())
	}
	if e.Route.Err != 0 {
		detail = append(detail, fmt.Sprintf("err %d", e.Route.Err))
	}
	return detail
}

func (routeView) jsonKey() string { return "route" }

func (routeView) appendJSON(b []byte, _ Names, e *event.Event) []byte {
	var p jsonObject
	b = p.str(b, "dev", e.Route.OifName.String())
	b = p.uint(b, "ifindex", uint64(e.Route.Oif))
	if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
		b = p.str(b, "gateway", g.String())
	}
	if s := e.Route.Src; s.IsValid() && !s.IsUnspecified() {
		b = p.str(b, "src", s.String())
	}
	b = strconv.AppendInt(p.key(b, "err"), int64(e.Route.Err), 10)
	b = p.uintOmit(b, "table", uint64(e.Route.Table))
	return p.close(b)
}

func (routeView) pcapng(_ Names, _ *event.Event, c []string) []string { return c }

func (routeView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte { return b }
