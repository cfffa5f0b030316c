package event

import "net/netip"

// layout is where one record form keeps each field: the narrow form
// (IPv4 addresses in one word: recordings, and the kernel's IPv4 events)
// and the wide one (four words per address). Both come from
// bpf/include/nettrace.h through the object's BTF (layout_gen.go); the
// header (time to device name) is the same in both.
type layout struct {
	form                               int // formNarrow or formWide: which of a section's offsets apply
	tuple, inner, ct, payload, skbSeen int
	// The tuple's and the conntrack entry's, held here because an event
	// reads up to five tuples: indexing the tables for each made
	// BenchmarkDecode 28% slower (43 -> 55 ns).
	tupleAt     tupleLayout
	conntrackAt conntrackLayout
}

// The record forms, indexing each struct's layout.
const (
	formNarrow = iota
	formWide
	forms
)

// The layout_gen.go tables are generated from the compiled BPF objects'
// BTF; layoutgen's test fails while they are not current. The amd64
// object's serve arm64 too: the record is the same on both
// (internal/probe's TestObjectsAgreeAcrossArchitectures).
//go:generate go run ./internal/layoutgen -obj ../../internal/probe/nat_x86_bpfel.o -out layout_gen.go

var narrow, wide = layoutOf(formNarrow), layoutOf(formWide)

func layoutOf(form int) layout {
	e := eventAt[form]
	return layout{form: form, tuple: e.tuple, inner: e.inner, ct: e.ct, payload: e.u, skbSeen: e.skbSeen,
		tupleAt: tupleAt[form], conntrackAt: conntrackAt[form]}
}

// addr reads an address; a wide one is IPv6 when its tuple says so.
func (l *layout) addr(b []byte, ipv6 bool) netip.Addr {
	if ipv6 {
		return netip.AddrFrom16([16]byte(b[:16]))
	}
	return netip.AddrFrom4([4]byte(b[:4]))
}

// tupleOf reads a tuple and says whether its addresses are IPv6 (a wide
// tuple's family byte follows its flags).
func (l *layout) tupleOf(b []byte, t *Tuple) bool {
	o := &l.tupleAt
	ipv6 := l.form == formWide && b[o.ipv6] != 0
	t.Src = l.addr(b[o.saddr:], ipv6)
	t.Dst = l.addr(b[o.daddr:], ipv6)
	t.Sport = le.Uint16(b[o.sport:])
	t.Dport = le.Uint16(b[o.dport:])
	t.Proto = b[o.proto]
	t.TCPFlags = b[o.tcpFlags]
	return ipv6
}

// decode fills e from a record of this layout, its packet bytes following
// at packetAt; b holds at least the form's record size (RecordSize or
// WideRecordSize).
func (l *layout) decode(b []byte, e *Event, packetAt int) {
	*e = Event{
		Time:    le.Uint64(b[offTs:]),
		Skb:     le.Uint64(b[offSkb:]),
		SkbSeen: le.Uint64(b[l.skbSeen:]),
		Netns:   le.Uint32(b[offNetns:]),
		Ifindex: le.Uint32(b[offIfindex:]),
		Point:   Point(b[offPoint]),
		Kind:    Kind(b[offKind]),
		Hook:    Hook(b[offHook]),
		Flags:   b[offFlags] &^ (flagWide | flagHops | FlagIPv6),
		CPU:     uint32(le.Uint16(b[offCPU:])),
	}
	if n := int(le.Uint16(b[offCaplen:])); n > 0 && len(b) >= packetAt+n {
		e.Packet = b[packetAt : packetAt+n]
	}
	copy(e.Ifname[:], b[offIfname:offIfname+16])
	ipv6 := l.tupleOf(b[l.tuple:], &e.Tuple)
	if e.Flags&FlagInner != 0 {
		l.tupleOf(b[l.inner:], &e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		ct, o := b[l.ct:], &l.conntrackAt
		e.CT.ID = le.Uint64(ct[o.id:])
		e.CT.Status = CTStatus(le.Uint32(ct[o.status:]))
		e.CT.Mark = le.Uint32(ct[o.mark:])
		e.CT.Zone = le.Uint16(ct[o.zone:])
		e.CT.Info = ct[o.ctinfo]
		l.tupleOf(ct[o.orig:], &e.CT.Orig)
		l.tupleOf(ct[o.reply:], &e.CT.Reply)
	}
	// The payload's addresses have the family of the event's tuple.
	p := b[l.payload:l.skbSeen]
	decodeSection(e, p, l, ipv6)
}
