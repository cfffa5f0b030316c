package event

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"net/netip"
)

// A recorded event keeps IPv4 addresses in its fixed record; its IPv6
// addresses follow the record in a block (FlagIPv6 set): a 16-bit mask of
// the address slots that are IPv6, then those addresses, 16 bytes each.
// An IPv4 event is recorded exactly as before IPv6 existed.

// FlagIPv6 marks a recorded event followed by its IPv6 address block. It
// is set by Encode and cleared by Decode: never in a kernel record.
const FlagIPv6 = 0x80

// addrSlots is how many addresses an event holds: its tuple's, its inner
// tuple's, its conntrack tuples', and from payloadSlot its point's
// payload's (slots past those are spare).
const (
	addrSlots   = 12
	payloadSlot = 8
)

// MaxIPv6Block is the largest block Encode appends.
const MaxIPv6Block = 2 + 16*addrSlots

var errIPv6Block = errors.New("event record's IPv6 address block is cut short")

// addrs lists the event's addresses in slot order.
func (e *Event) addrs() [addrSlots]netip.Addr {
	a := [addrSlots]netip.Addr{e.Tuple.Src, e.Tuple.Dst, e.Inner.Src, e.Inner.Dst,
		e.CT.Orig.Src, e.CT.Orig.Dst, e.CT.Reply.Src, e.CT.Reply.Dst}
	payload := addrsSection(e)
	copy(a[payloadSlot:], payload[:])
	return a
}

// setAddr sets the address in slot i.
func (e *Event) setAddr(i int, a netip.Addr) {
	slots := [...]*netip.Addr{&e.Tuple.Src, &e.Tuple.Dst, &e.Inner.Src, &e.Inner.Dst,
		&e.CT.Orig.Src, &e.CT.Orig.Dst, &e.CT.Reply.Src, &e.CT.Reply.Dst}
	if i < len(slots) {
		*slots[i] = a
		return
	}
	if i -= payloadSlot; i < payloadAddrs {
		setAddrSection(e, i, a)
	}
}

// appendIPv6Block appends the event's IPv6 addresses, if it has any.
func appendIPv6Block(b []byte, e *Event) ([]byte, bool) {
	var mask uint16
	addrs := e.addrs()
	for i, a := range addrs {
		if a.Is6() {
			mask |= 1 << i
		}
	}
	if mask == 0 {
		return b, false
	}
	b = binary.LittleEndian.AppendUint16(b, mask)
	for i, a := range addrs {
		if mask&(1<<i) != 0 {
			b = append(b, a.AsSlice()...)
		}
	}
	return b, true
}

// ipv6BlockLen is the length of the block at the start of b.
func ipv6BlockLen(b []byte) (int, error) {
	if len(b) < 2 {
		return 0, errIPv6Block
	}
	n := 2 + 16*bits.OnesCount16(binary.LittleEndian.Uint16(b)&(1<<addrSlots-1))
	if len(b) < n {
		return 0, errIPv6Block
	}
	return n, nil
}

// decodeIPv6Block sets the event's IPv6 addresses from a block at the
// start of b, whose length ipv6BlockLen checked.
func decodeIPv6Block(b []byte, e *Event) {
	mask, n := binary.LittleEndian.Uint16(b), 2
	for i := range addrSlots {
		if mask&(1<<i) != 0 {
			e.setAddr(i, netip.AddrFrom16([16]byte(b[n:n+16])))
			n += 16
		}
	}
}

// RecordedLen is the length of e as Encode records it.
func RecordedLen(e *Event) int {
	n := RecordSize + len(e.Packet)
	v6 := 0
	for _, a := range e.addrs() {
		if a.Is6() {
			v6++
		}
	}
	if v6 > 0 {
		n += 2 + 16*v6
	}
	return n
}
