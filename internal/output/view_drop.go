package output

import (
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// dropView shows the drop point: a freed packet, with the kernel's reason and where.
type dropView struct{}

// JSONDrop is a drop event's payload.
type JSONDrop struct {
	Reason   string `json:"reason"`
	Location string `json:"location"`
}

func (dropView) step(n Names, _ *flow.Flow, e *event.Event) string {
	return "DROPPED " + n.dropReason(e.Drop.Reason) + " at " + n.symbol(e.Drop.Location)
}

func (dropView) detail(n Names, e *event.Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple), "dropped: "+n.dropReason(e.Drop.Reason), "at "+n.symbol(e.Drop.Location))
	return detail
}

func (dropView) jsonKey() string { return "drop" }

func (dropView) appendJSON(b []byte, n Names, e *event.Event) []byte {
	var p jsonObject
	b = p.str(b, "reason", n.dropReason(e.Drop.Reason))
	b = p.str(b, "location", n.symbol(e.Drop.Location))
	return p.close(b)
}

func (dropView) pcapng(n Names, e *event.Event, c []string) []string {
	return append(c, "drop_reason: "+n.dropReason(e.Drop.Reason), "drop_location: "+n.symbol(e.Drop.Location))
}

func (dropView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte { return b }
