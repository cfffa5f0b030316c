package event

import (
	"encoding/binary"
	"net/netip"
)

// Drop is the payload of a drop event: where the kernel freed the packet,
// and why. The same in the narrow and the wide record.
type Drop struct {
	Location uint64 // kernel address that freed the packet
	Reason   uint32 // enum skb_drop_reason of the kernel that recorded it
	// The conntrack table of the drop's namespace, for a packet a netfilter
	// hook dropped before it had an entry, as user space read it after the
	// drop (ctstat): its entries and limit, and the packets conntrack's drop
	// counter counted since the reading before. Zero: not read.
	CTCount, CTMax uint32
	CTDrops        uint64
}

// CTRead says whether the conntrack table was read for the drop.
func (d *Drop) CTRead() bool { return d.CTMax != 0 }

type dropSection struct{}

func (dropSection) decode(e *Event, p []byte, _ *layout, _ bool) {
	e.Drop.Location = le.Uint64(p[0:])
	e.Drop.Reason = le.Uint32(p[8:])
	e.Drop.CTCount, e.Drop.CTMax = le.Uint32(p[12:]), le.Uint32(p[16:])
	e.Drop.CTDrops = le.Uint64(p[24:])
}

func (dropSection) encode(e *Event, p []byte) {
	le.PutUint64(p[0:], e.Drop.Location)
	le.PutUint32(p[8:], e.Drop.Reason)
	le.PutUint32(p[12:], e.Drop.CTCount)
	le.PutUint32(p[16:], e.Drop.CTMax)
	le.PutUint64(p[24:], e.Drop.CTDrops)
}

func (dropSection) appendCompact(b []byte, e *Event) []byte {
	b = le.AppendUint64(b, e.Drop.Location)
	b = le.AppendUint32(b, e.Drop.Reason)
	b = binary.AppendUvarint(b, uint64(e.Drop.CTCount))
	b = binary.AppendUvarint(b, uint64(e.Drop.CTMax))
	return binary.AppendUvarint(b, e.Drop.CTDrops)
}

func (dropSection) readCompact(r *compactReader, e *Event) {
	e.Drop.Location, e.Drop.Reason = r.u64(), r.u32()
	e.Drop.CTCount, e.Drop.CTMax, e.Drop.CTDrops = uint32(r.uvarint()), uint32(r.uvarint()), r.uvarint()
}

func (dropSection) addrs(*Event) (a [payloadAddrs]netip.Addr) { return a }
func (dropSection) setAddr(*Event, int, netip.Addr)           {}

func (dropSection) sample(base Event) Event {
	base.Point, base.Kind = PointDrop, KindDrop
	base.Drop = Drop{Location: 0xffffffff81000000, Reason: 31, CTCount: 512, CTMax: 512, CTDrops: 3}
	return base
}
