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
	VNI    uint32
	Remote netip.Addr // remote VTEP
	Local  netip.Addr
	Port   uint16
}

type vxlanSection struct{}

func (vxlanSection) decode(e *Event, p []byte, l *layout, ipv6 bool) {
	o := vxlanAt[l.form]
	e.VXLAN.VNI = le.Uint32(p[o.vni:])
	e.VXLAN.Remote = l.addr(p[o.remote:], ipv6)
	e.VXLAN.Local = l.addr(p[o.local:], ipv6)
	e.VXLAN.Port = le.Uint16(p[o.port:])
}

func (vxlanSection) encode(e *Event, p []byte) {
	o := vxlanAt[formNarrow]
	le.PutUint32(p[o.vni:], e.VXLAN.VNI)
	putAddr4(p[o.remote:o.remote+4], e.VXLAN.Remote)
	putAddr4(p[o.local:o.local+4], e.VXLAN.Local)
	le.PutUint16(p[o.port:], e.VXLAN.Port)
}

func (vxlanSection) appendCompact(b []byte, e *Event) []byte {
	b = le.AppendUint32(b, e.VXLAN.VNI)
	b = appendAddr(b, e.VXLAN.Remote)
	b = appendAddr(b, e.VXLAN.Local)
	return le.AppendUint16(b, e.VXLAN.Port)
}

func (vxlanSection) readCompact(r *compactReader, e *Event) {
	e.VXLAN.VNI = r.u32()
	e.VXLAN.Remote, e.VXLAN.Local = r.addr(), r.addr()
	e.VXLAN.Port = r.u16()
}

func (vxlanSection) addrs(e *Event) [payloadAddrs]netip.Addr {
	return [payloadAddrs]netip.Addr{e.VXLAN.Remote, e.VXLAN.Local}
}

func (vxlanSection) setAddr(e *Event, i int, a netip.Addr) {
	setAddrOfPair(i, a, &e.VXLAN.Remote, &e.VXLAN.Local)
}

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
