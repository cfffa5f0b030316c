package event

import (
	"fmt"
	"net/netip"
	"strconv"
)

// PointVXLAN is the vxlan point's value in enum nt_point, and its kinds'
// values are in enum nt_kind.
const (
	PointVXLAN Point = 3

	KindVXLANEnter Kind = 4 // the inner packet handed to a vxlan device
	KindVXLANEncap Kind = 5 // the encapsulated packet built
)

// VXLAN is the payload of a vxlan event: the encapsulation's VNI and
// tunnel endpoints.
type VXLAN struct {
	VNI    uint32     `nt:"vni"`
	Remote netip.Addr `nt:"remote"` // remote VTEP
	Local  netip.Addr `nt:"local"`
	Port   uint16     `nt:"port"`
}

type vxlanSection struct{}

func (vxlanSection) name() string { return "vxlan" }

func (vxlanSection) journeyStep() bool { return true }

func (vxlanSection) kinds() []kindName {
	return []kindName{{KindVXLANEnter, "enter", DirectionNone}, {KindVXLANEncap, "encap", DirectionOutbound}}
}

func (vxlanSection) sample(base Event) Event {
	base.Point, base.Kind = PointVXLAN, KindVXLANEncap
	base.VXLAN = VXLAN{VNI: 1, Remote: netip.MustParseAddr("172.20.0.2"), Local: netip.MustParseAddr("172.20.0.1"), Port: 8472}
	return base
}

// JSONVXLAN is a vxlan event's payload.
type JSONVXLAN struct {
	VNI    uint32 `json:"vni"`
	Remote string `json:"remote"`
	Local  string `json:"local"`
	Port   uint16 `json:"port,omitempty"`
}

func (vxlanSection) Step(_ Lookup, _ TranslationHooks, e *Event) string {
	if e.Kind == KindVXLANEnter {
		return "into vxlan device"
	}
	return "vxlan VNI " + strconv.FormatUint(uint64(e.VXLAN.VNI), 10) + " " + e.VXLAN.Local.String() + " -> VTEP " + e.VXLAN.Remote.String()
}

func (vxlanSection) Detail(_ Lookup, e *Event, detail []string) []string {
	if e.HasInner() {
		detail = append(detail, FormatTuple(e.Inner))
	} else {
		detail = append(detail, FormatTuple(e.Tuple))
	}
	if e.Kind == KindVXLANEncap {
		detail = append(detail, fmt.Sprintf("vni %d vtep %s -> %s", e.VXLAN.VNI, e.VXLAN.Local, e.VXLAN.Remote))
	}
	return detail
}

func (vxlanSection) JSONKey() string { return "vxlan" }

func (vxlanSection) JSONSchema() any { return (*JSONVXLAN)(nil) }

func (vxlanSection) AppendJSON(b []byte, _ Lookup, e *Event) []byte {
	var p JSONObject
	b = p.Uint(b, "vni", uint64(e.VXLAN.VNI))
	b = p.Str(b, "remote", e.VXLAN.Remote.String())
	b = p.Str(b, "local", e.VXLAN.Local.String())
	b = p.UintOmit(b, "port", uint64(e.VXLAN.Port))
	return p.Close(b)
}

func (vxlanSection) PCAPNG(_ Lookup, e *Event, c []string) []string {
	if e.Kind != KindVXLANEncap {
		return c
	}
	return append(c, fmt.Sprintf("vni: %d", e.VXLAN.VNI), "vtep: "+e.VXLAN.Remote.String())
}

func (vxlanSection) AppendJSONFields(b []byte, _ *JSONObject, _ *Event) []byte { return b }
