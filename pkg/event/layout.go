package event

import "net/netip"

// layout is where one record form keeps each field: the narrow form
// (IPv4 addresses in one word: recordings, and the kernel's IPv4 events)
// and the wide one (four words per address). The header (time to device
// name) and the drop and tcp payloads are the same in both.
type layout struct {
	form                                     int // formNarrow or formWide: which of a section's offsets apply
	size, tuple, inner, ct, payload, skbSeen int
	tupleSize, addrSize                      int
	ctTuples                                 int // within the conntrack section
}

// The record forms, indexing each section's offsets.
const (
	formNarrow = iota
	formWide
	forms
)

var narrow = layout{form: formNarrow, size: RecordSize, tuple: 48, inner: 64, ct: 80, payload: 136, skbSeen: 176,
	tupleSize: 16, addrSize: 4, ctTuples: 24}

var wide = layout{form: formWide, size: WideRecordSize, tuple: 48, inner: 88, ct: 128, payload: 232, skbSeen: 296,
	tupleSize: 40, addrSize: 16, ctTuples: 24}

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
	a := 2 * l.addrSize
	ipv6 := l.addrSize == 16 && b[a+6] != 0
	t.Src = l.addr(b[0:], ipv6)
	t.Dst = l.addr(b[l.addrSize:], ipv6)
	t.Sport = le.Uint16(b[a:])
	t.Dport = le.Uint16(b[a+2:])
	t.Proto = b[a+4]
	t.TCPFlags = b[a+5]
	return ipv6
}

// decode fills e from a record of this layout, its packet bytes following
// at packetAt; b holds at least l.size bytes.
func (l *layout) decode(b []byte, e *Event, packetAt int) {
	*e = Event{
		Time:    le.Uint64(b[offTime:]),
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
		ct := b[l.ct:]
		e.CT.ID = le.Uint64(ct[0:])
		e.CT.Status = CTStatus(le.Uint32(ct[8:]))
		e.CT.Mark = le.Uint32(ct[12:])
		e.CT.Zone = le.Uint16(ct[16:])
		e.CT.Info = ct[18]
		l.tupleOf(ct[l.ctTuples:], &e.CT.Orig)
		l.tupleOf(ct[l.ctTuples+l.tupleSize:], &e.CT.Reply)
	}
	// The payload's addresses have the family of the event's tuple.
	p := b[l.payload:l.skbSeen]
	decodeSection(e, p, l, ipv6)
}
