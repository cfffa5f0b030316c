package event

import "net/netip"

// PointNAT is the nat point's value in enum nt_point, and its kinds'
// values are in enum nt_kind.
const (
	PointNAT Point = 1

	KindNAT Kind = 1 // the tuple before and after one NAT hook
)

// NAT is the payload of a nat event: the tuple before and after one NAT
// hook, and the device of the route attached after it.
type NAT struct {
	Pre        Tuple // before the hook's translation (valid with FlagPre)
	OutIfindex uint32
	OutIfname  Name // device of the route attached after the hook
}

type natSection struct{}

// natOffsets are where struct nt_nat keeps its fields past pre, in the
// narrow record and the wide one.
var natOffsets = [forms]struct{ outIfindex, outIfname int }{
	formNarrow: {outIfindex: 16, outIfname: 24},
	formWide:   {outIfindex: 40, outIfname: 48},
}

func (natSection) decode(e *Event, p []byte, l *layout, _ bool) {
	o := natOffsets[l.form]
	if e.Flags&FlagPre != 0 {
		l.tupleOf(p, &e.NAT.Pre)
	}
	e.NAT.OutIfindex = le.Uint32(p[o.outIfindex:])
	copy(e.NAT.OutIfname[:], p[o.outIfname:o.outIfname+16])
}

func (natSection) encode(e *Event, p []byte) {
	o := natOffsets[formNarrow]
	if e.Flags&FlagPre != 0 {
		encodeTuple(p, &e.NAT.Pre)
	}
	le.PutUint32(p[o.outIfindex:], e.NAT.OutIfindex)
	copy(p[o.outIfname:o.outIfname+16], e.NAT.OutIfname[:])
}

func (natSection) appendCompact(b []byte, e *Event) []byte {
	if e.Flags&FlagPre != 0 {
		b = appendTuple(b, &e.NAT.Pre)
	}
	b = le.AppendUint32(b, e.NAT.OutIfindex)
	return appendName(b, &e.NAT.OutIfname)
}

func (natSection) readCompact(r *compactReader, e *Event) {
	if e.Flags&FlagPre != 0 {
		r.tuple(&e.NAT.Pre)
	}
	e.NAT.OutIfindex = r.u32()
	r.name(&e.NAT.OutIfname)
}

func (natSection) addrs(e *Event) [payloadAddrs]netip.Addr {
	return [payloadAddrs]netip.Addr{e.NAT.Pre.Src, e.NAT.Pre.Dst}
}

func (natSection) setAddr(e *Event, i int, a netip.Addr) {
	setAddrOfPair(i, a, &e.NAT.Pre.Src, &e.NAT.Pre.Dst)
}

func (natSection) name() string { return "nat" }

func (natSection) kinds() []kindName { return []kindName{{KindNAT, "nat"}} }

func (natSection) sample(base Event) Event {
	base.Point, base.Kind, base.Flags = PointNAT, KindNAT, base.Flags|FlagPre
	base.NAT = NAT{Pre: base.Tuple, OutIfindex: 4}
	copy(base.NAT.OutIfname[:], "flannel.1")
	return base
}
