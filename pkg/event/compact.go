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
// without their padding, an IPv4 address in four bytes. A typical event
// takes 60 to 130 bytes this way against 640 for an Event, which is what
// bounds how many flows fit in memory and how fast a large recording
// replays. Unlike the kernel record (Encode), the form is private to a
// process and may change between versions: recordings never hold it.
//
// Addresses carry their length, so an IPv6 address costs only the events
// that hold one, and an unset address stays unset.

// ErrCompactCorrupt reports a compact event cut short or not one at all.
var ErrCompactCorrupt = errors.New("compact event truncated or corrupt")

// AppendCompact appends e's compact form to b. The packet bytes are not
// kept: they refer to a buffer the caller reuses.
func AppendCompact(b []byte, e *Event) []byte {
	b = le.AppendUint64(b, e.Time)
	b = le.AppendUint64(b, e.Skb)
	b = le.AppendUint64(b, e.SkbSeen)
	b = le.AppendUint32(b, e.Netns)
	b = le.AppendUint32(b, e.Ifindex)
	b = append(b, byte(e.Point), byte(e.Kind), byte(e.Hook), e.Flags)
	b = binary.AppendUvarint(b, uint64(e.CPU))
	b = appendName(b, &e.Ifname)
	b = appendTuple(b, &e.Tuple)
	if e.Flags&FlagInner != 0 {
		b = appendTuple(b, &e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		b = le.AppendUint64(b, e.CT.ID)
		b = le.AppendUint32(b, uint32(e.CT.Status))
		b = le.AppendUint32(b, e.CT.Mark)
		b = le.AppendUint16(b, e.CT.Zone)
		b = append(b, e.CT.Info)
		b = appendTuple(b, &e.CT.Orig)
		b = appendTuple(b, &e.CT.Reply)
	}
	b = appendCompactSection(b, e)
	return b
}

// DecodeCompact fills e from the compact event at the start of b and
// returns its length. It does not allocate.
func DecodeCompact(b []byte, e *Event) (int, error) {
	r := compactReader{b: b}
	*e = Event{Time: r.u64(), Skb: r.u64(), SkbSeen: r.u64(), Netns: r.u32(), Ifindex: r.u32(),
		Point: Point(r.u8()), Kind: Kind(r.u8()), Hook: Hook(r.u8()), Flags: r.u8()}
	e.CPU = uint32(r.uvarint())
	r.name(&e.Ifname)
	r.tuple(&e.Tuple)
	if e.Flags&FlagInner != 0 {
		r.tuple(&e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		e.CT = Conntrack{ID: r.u64(), Status: CTStatus(r.u32()), Mark: r.u32(), Zone: r.u16(), Info: r.u8()}
		r.tuple(&e.CT.Orig)
		r.tuple(&e.CT.Reply)
	}
	readCompactSection(&r, e)
	if r.short {
		return 0, ErrCompactCorrupt
	}
	return r.off, nil
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
