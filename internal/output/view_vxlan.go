package output

import (
	"fmt"
	"strconv"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// vxlanView shows the vxlan point: a packet handed to a vxlan device, and its encapsulation.
type vxlanView struct{}

// JSONVXLAN is a vxlan event's payload.
type JSONVXLAN struct {
	VNI    uint32 `json:"vni"`
	Remote string `json:"remote"`
	Local  string `json:"local"`
	Port   uint16 `json:"port,omitempty"`
}

func (vxlanView) step(_ Names, _ *flow.Flow, e *event.Event) string {
	if e.Kind == event.KindVXLANEnter {
		return "into vxlan device"
	}
	return "vxlan VNI " + strconv.FormatUint(uint64(e.VXLAN.VNI), 10) + " " + e.VXLAN.Local.String() + " -> VTEP " + e.VXLAN.Remote.String()
}

func (vxlanView) detail(_ Names, e *event.Event, detail []string) []string {
	if e.HasInner() {
		detail = append(detail, FormatTuple(e.Inner))
	} else {
		detail = append(detail, FormatTuple(e.Tuple))
	}
	if e.Kind == event.KindVXLANEncap {
		detail = append(detail, fmt.Sprintf("vni %d vtep %s -> %s", e.VXLAN.VNI, e.VXLAN.Local, e.VXLAN.Remote))
	}
	return detail
}

func (vxlanView) jsonKey() string { return "vxlan" }

func (vxlanView) appendJSON(b []byte, _ Names, e *event.Event) []byte {
	var p jsonObject
	b = p.uint(b, "vni", uint64(e.VXLAN.VNI))
	b = p.str(b, "remote", e.VXLAN.Remote.String())
	b = p.str(b, "local", e.VXLAN.Local.String())
	b = p.uintOmit(b, "port", uint64(e.VXLAN.Port))
	return p.close(b)
}

func (vxlanView) pcapng(_ Names, e *event.Event, c []string) []string {
	if e.Kind != event.KindVXLANEncap {
		return c
	}
	return append(c, fmt.Sprintf("vni: %d", e.VXLAN.VNI), "vtep: "+e.VXLAN.Remote.String())
}

func (vxlanView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte { return b }
