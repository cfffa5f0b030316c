package event

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
)

// The compact form is how events are held in memory while their flow is
// open: only the sections an event has (the inner tuple with FlagInner,
// the conntrack entry with FlagCT, the payload of its point), device names
// without their padding, an IPv4 address in four bytes. Events are held in
// sequences (a packet's path), and an event's identity, device and
// conntrack entry are mostly its predecessor's: the same skb from hop to
// hop, the device a NAT hook and the next hop share, one entry per
// namespace crossed. Those are written once per run of equal values and
// the time as the distance from the previous event (CompactBase). An
// event takes at most a quarter of an Event's 640 bytes alone
// (TestCompactIsSmall) and less in a sequence, which is what bounds how
// many flows fit in memory and how fast a large recording replays. Unlike the kernel record (Encode), the form is
// private to a process and may change between versions: recordings never
// hold it.
//
// Addresses carry their length, so an IPv6 address costs only the events
// that hold one, and an unset address stays unset.

// ErrCompactCorrupt reports a compact event cut short or not one at all.
var ErrCompactCorrupt = errors.New("compact event truncated or corrupt")

// CompactBase is what the next event of a compact sequence is written
// against: the previous event's time, and where in the sequence the last
// skb identity, device and conntrack entry written start (plus one; zero
// while there is none). Offsets, not copies, so that a sequence of one
// event (most flows on a busy node are one packet) costs no more than the
// event. A sequence is decoded with a base of its own that starts, as the
// encoder's did, at its zero value.
type CompactBase struct {
	time               uint64
	skbAt, devAt, ctAt uint32
}

// What an event shares with its base, in its compact form's first byte.
const (
	sameSkb    = 1 << iota // Skb and SkbSeen
	sameDev                // Netns, Ifindex and Ifname
	sameCT                 // the conntrack entry (with FlagCT)
	timeBefore             // the time is the distance back from the base's
)

// AppendCompact appends e's compact form to seq, the sequence base was
// kept for, and makes e the base of the next event. The packet bytes are
// not kept but a drop's first ones (dropBytesKept); decoded, those refer
// to seq.
func AppendCompact(seq []byte, e *Event, base *CompactBase) []byte {
	// Encoded aside and appended whole, so that the sequence grows once per
	// event at most.
	var scratch [2 * RecordSize]byte
	start := len(seq)
	dt := e.Time - base.time
	var same byte
	if e.Time < base.time {
		same, dt = timeBefore, base.time-e.Time
	}
	b := append(scratch[:0], 0, byte(e.Point), byte(e.Kind), byte(e.Hook), e.Flags)
	b = binary.AppendUvarint(b, dt)
	b = binary.AppendUvarint(b, uint64(e.CPU))
	// Each shared part is written in full, then taken back when the base's
	// bytes are the same: every part's form is self-delimiting, so equal
	// bytes are an equal value.
	from := len(b)
	b = le.AppendUint64(le.AppendUint64(b, e.Skb), e.SkbSeen)
	b, same = shared(seq, b, start, from, &base.skbAt, same, sameSkb)
	from = len(b)
	b = appendName(binary.AppendUvarint(le.AppendUint32(b, e.Netns), uint64(e.Ifindex)), &e.Ifname)
	b, same = shared(seq, b, start, from, &base.devAt, same, sameDev)
	b = appendTuple(b, &e.Tuple)
	if e.Flags&FlagInner != 0 {
		b = appendTuple(b, &e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		from = len(b)
		b = le.AppendUint64(b, e.CT.ID)
		b = le.AppendUint32(b, uint32(e.CT.Status))
		b = le.AppendUint32(b, e.CT.Mark)
		b = le.AppendUint16(b, e.CT.Zone)
		b = append(b, e.CT.Info)
		b = appendTuple(appendTuple(b, &e.CT.Orig), &e.CT.Reply)
		b, same = shared(seq, b, start, from, &base.ctAt, same, sameCT)
	}
	b = appendCompactSection(b, e)
	b[0] = same
	base.time = e.Time
	return append(seq, b...)
}

// shared takes the part of an event b holds from from back out of b, and
// adds bit to same, when seq holds the same bytes where *at says;
// otherwise *at says where the part will be (b is to start at start in
// seq).
func shared(seq, b []byte, start, from int, at *uint32, same, bit byte) ([]byte, byte) {
	part := b[from:]
	if *at != 0 && int(*at)-1+len(part) <= len(seq) && bytes.Equal(seq[*at-1:int(*at)-1+len(part)], part) {
		return b[:from], same | bit
	}
	*at = uint32(start+from) + 1
	return b, same
}

// DecodeCompact fills e from the compact event at offset off of seq,
// decoded with base from the sequence's start, makes e the base of the
// next event and returns the event's length. It does not allocate.
func DecodeCompact(seq []byte, off int, e *Event, base *CompactBase) (int, error) {
	r := compactReader{b: seq, off: off}
	same := r.u8()
	*e = Event{Point: Point(r.u8()), Kind: Kind(r.u8()), Hook: Hook(r.u8()), Flags: r.u8()}
	if dt := r.uvarint(); same&timeBefore != 0 {
		e.Time = base.time - dt
	} else {
		e.Time = base.time + dt
	}
	e.CPU = uint32(r.uvarint())
	p := r.part(same&sameSkb != 0, &base.skbAt, off)
	e.Skb, e.SkbSeen = p.u64(), p.u64()
	r.done(&p, same&sameSkb != 0)
	p = r.part(same&sameDev != 0, &base.devAt, off)
	e.Netns, e.Ifindex = p.u32(), uint32(p.uvarint())
	p.name(&e.Ifname)
	r.done(&p, same&sameDev != 0)
	r.tuple(&e.Tuple)
	if e.Flags&FlagInner != 0 {
		r.tuple(&e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		p = r.part(same&sameCT != 0, &base.ctAt, off)
		e.CT = Conntrack{ID: p.u64(), Status: CTStatus(p.u32()), Mark: p.u32(), Zone: p.u16(), Info: p.u8()}
		p.tuple(&e.CT.Orig)
		p.tuple(&e.CT.Reply)
		r.done(&p, same&sameCT != 0)
	}
	readCompactSection(&r, e)
	if r.short || same&^(sameSkb|sameDev|sameCT|timeBefore) != 0 || (same&sameCT != 0 && e.Flags&FlagCT == 0) {
		return 0, ErrCompactCorrupt
	}
	base.time = e.Time
	return r.off - off, nil
}

// part returns the reader of a part an event may share: r's own place
// (noted in *at) when the event has the part, or an earlier event's copy
// (before off, where *at says) when it shares it.
func (r *compactReader) part(shared bool, at *uint32, off int) compactReader {
	if !shared {
		*at = uint32(r.off) + 1
		return *r
	}
	if *at == 0 || int(*at)-1 >= off {
		return compactReader{short: true}
	}
	return compactReader{b: r.b[:off], off: int(*at) - 1}
}

// done continues r after the part p read: past it when it was r's own.
func (r *compactReader) done(p *compactReader, shared bool) {
	if !shared {
		r.off = p.off
	}
	r.short = r.short || p.short
}

func appendName(b []byte, n *Name) []byte {
	l := 0
	for l < len(n) && n[l] != 0 {
		l++
	}
	return append(append(b, byte(l)), n[:l]...)
}

// Address lengths in the compact form.
const (
	addrNone = 0
	addrV4   = 4
	addrV6   = 16
)

func appendAddr(b []byte, a netip.Addr) []byte {
	switch {
	case a.Is4():
		v := a.As4()
		return append(append(b, addrV4), v[:]...)
	case a.IsValid():
		v := a.As16()
		return append(append(b, addrV6), v[:]...)
	}
	return append(b, addrNone)
}

func appendTuple(b []byte, t *Tuple) []byte {
	b = appendAddr(b, t.Src)
	b = appendAddr(b, t.Dst)
	b = le.AppendUint16(b, t.Sport)
	b = le.AppendUint16(b, t.Dport)
	return append(b, t.Proto, t.TCPFlags)
}

// compactReader reads a compact event; past the end it reads zeros and
// remembers that it was short (or read a length it cannot be), so that
// decoding checks once.
type compactReader struct {
	b     []byte
	off   int
	short bool
}

func (r *compactReader) take(n int) []byte {
	if r.short || len(r.b)-r.off < n {
		r.short = true
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *compactReader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *compactReader) u16() uint16 {
	if p := r.take(2); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (r *compactReader) u32() uint32 {
	if p := r.take(4); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (r *compactReader) u64() uint64 {
	if p := r.take(8); p != nil {
		return le.Uint64(p)
	}
	return 0
}

func (r *compactReader) uvarint() uint64 {
	if r.short {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.short = true
		return 0
	}
	r.off += n
	return v
}

func (r *compactReader) name(n *Name) {
	l := int(r.u8())
	if l > len(n) {
		r.short = true
		return
	}
	copy(n[:], r.take(l))
	if bytes.IndexByte(n[:l], 0) >= 0 {
		r.short = true // a name ends at its first NUL: appendName never wrote this
	}
}

func (r *compactReader) addr() netip.Addr {
	switch l := r.u8(); l {
	case addrV4:
		if p := r.take(4); p != nil {
			return netip.AddrFrom4([4]byte(p))
		}
	case addrV6:
		if p := r.take(16); p != nil {
			return netip.AddrFrom16([16]byte(p))
		}
	case addrNone:
	default:
		r.short = true
	}
	return netip.Addr{}
}

func (r *compactReader) tuple(t *Tuple) {
	t.Src, t.Dst = r.addr(), r.addr()
	t.Sport, t.Dport = r.u16(), r.u16()
	t.Proto, t.TCPFlags = r.u8(), r.u8()
}
