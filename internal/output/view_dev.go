package output

import (
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// devView shows the dev point: a packet entering or leaving a device.
type devView struct{}

func (devView) step(_ Names, _ *flow.Flow, e *event.Event) string {
	return e.Kind.String()
}

func (devView) detail(_ Names, e *event.Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple))
	if e.HasInner() {
		detail = append(detail, "inner "+FormatTuple(e.Inner))
	}
	return detail
}

func (devView) jsonKey() string { return "" }

func (devView) appendJSON(b []byte, _ Names, _ *event.Event) []byte { return b }

func (devView) pcapng(_ Names, _ *event.Event, c []string) []string { return c }

func (devView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte { return b }
