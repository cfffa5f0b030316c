package output

import (
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// A view is how the renderers show one point's events: each point's view
// is one file (view_<point>.go) with its JSON payload's schema, registered
// in views. Events carry the payload pkg/event's section of the point
// decodes; a view only renders it.
type view interface {
	// step says in a few words what the event did to its packet, for
	// timelines and flows' steps; f (nil when unknown) names the hook of
	// the request's translation a reply's undoes.
	step(n Names, f *flow.Flow, e *event.Event) string
	// detail appends the words of the event's line (text --events).
	detail(n Names, e *event.Event, detail []string) []string
	// jsonKey is the key of the point's payload object in an event's JSON
	// object ("" for none), and appendJSON appends that object.
	jsonKey() string
	appendJSON(b []byte, n Names, e *event.Event) []byte
	// appendJSONFields appends the point's fields that sit at the top of
	// an event's object, after its tuples (the nat point's pre-NAT tuple).
	appendJSONFields(b []byte, o *jsonObject, e *event.Event) []byte
	// pcapng appends the point's packet comments ("key: value") to c.
	pcapng(n Names, e *event.Event, c []string) []string
}

// views holds each point's view, indexed by the point.
var views = [...]view{
	event.PointNAT:   natView{},
	event.PointRoute: routeView{},
	event.PointVXLAN: vxlanView{},
	event.PointSYN:   synView{},
	event.PointDrop:  dropView{},
	event.PointDev:   devView{},
	event.PointTCP:   tcpView{},
}

// viewOf returns a point's view; a point this build does not know (a
// newer recording's) is shown by its kind alone.
func viewOf(p event.Point) view {
	if int(p) < len(views) && views[p] != nil {
		return views[p]
	}
	return unknownView{}
}

// unknownView shows an event of a point this build does not know.
type unknownView struct{}

func (unknownView) step(_ Names, _ *flow.Flow, e *event.Event) string        { return e.Kind.String() }
func (unknownView) detail(_ Names, _ *event.Event, detail []string) []string { return detail }
func (unknownView) jsonKey() string                                          { return "" }
func (unknownView) appendJSON(b []byte, _ Names, _ *event.Event) []byte      { return b }
func (unknownView) pcapng(_ Names, _ *event.Event, c []string) []string      { return c }
func (unknownView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte {
	return b
}
