package event

import "net/netip"

// Drop is the payload of a drop event: where the kernel freed the packet,
// and why. The same in the narrow and the wide record.
type Drop struct {
	Location uint64 // kernel address that freed the packet
	Reason   uint32 // enum skb_drop_reason of the kernel that recorded it
}

type dropSection struct{}

func (dropSection) decode(e *Event, p []byte, _ *layout, _ bool) {
	e.Drop.Location = le.Uint64(p[0:])
	e.Drop.Reason = le.Uint32(p[8:])
}

func (dropSection) encode(e *Event, p []byte) {
	le.PutUint64(p[0:], e.Drop.Location)
	le.PutUint32(p[8:], e.Drop.Reason)
}

func (dropSection) appendCompact(b []byte, e *Event) []byte {
	b = le.AppendUint64(b, e.Drop.Location)
	return le.AppendUint32(b, e.Drop.Reason)
}

func (dropSection) readCompact(r *compactReader, e *Event) {
	e.Drop.Location, e.Drop.Reason = r.u64(), r.u32()
}

func (dropSection) addrs(*Event) (a [payloadAddrs]netip.Addr) { return a }
func (dropSection) setAddr(*Event, int, netip.Addr)           {}

func (dropSection) sample(base Event) Event {
	base.Point, base.Kind = PointDrop, KindDrop
	base.Drop = Drop{Location: 0xffffffff81000000, Reason: 31}
	return base
}
