package event

import (
	"bytes"
	"encoding/binary"
)

// A kernel record may carry its packet's next events (NT_F_HOPS, struct
// nt_journey in bpf/include/maps.h): the kernel gathers the steps of one
// packet (the same skb and identity, and the same inner tuple or the
// packet decapsulated from it) made one after the other on one CPU into
// one record, so that a packet crossing veth pairs, bridges, NAT hooks and
// the tunnel's receiving end costs the ring buffer one record rather than
// one per step. The record is its own event and its packet's bytes, then
// the next events as narrow records (the hops), then their count. A hop
// carries its packet bytes no more: it takes the record's, taken at its
// first step, or the packet inside them once decapsulated, translated
// when NAT has changed its addresses or ports since (the kernel keeps a
// TCP or UDP packet's journey across a translation, and starts a new one
// where it is encapsulated: the outer headers are not in the record's
// bytes). A TCP event made on the CPU while the journey was pending (a
// socket's state changed as its packet was processed) joins it too, with
// no packet bytes: it has none on its own either. So does a SYN the
// listener queued (reported once its SYN-ACK went out): its bytes are the
// SYN's, which the SYN's own steps carry.

// flagHops marks a kernel record that ends with hops (NT_F_HOPS).
const flagHops = 0x10

// hopsTailSize is the size of the count after the hops (struct
// nt_hops_tail).
const hopsTailSize = 8

// KernelHops says how many events follow a kernel record's own: 0 for a
// record without any, or whose count does not fit its length (its own
// event still decodes).
func KernelHops(b []byte) int {
	if len(b) < RecordSize+hopsTailSize || b[offFlags]&(flagHops|flagWide) != flagHops {
		return 0
	}
	n := int(le.Uint32(b[len(b)-hopsTailSize:]))
	if n > (len(b)-RecordSize-hopsTailSize)/RecordSize {
		return 0
	}
	return n
}

// DecodeKernelHop fills e with the kernel record b's hop i (0 <= i <
// KernelHops(b)), its packet bytes the record's: e.Packet then refers into
// b, as with DecodeKernel, or, for a step after a NAT translation, into
// scratch, where it writes them translated as the step's tuple says
// (appendTranslated). It returns scratch, grown if it had to: reused, it
// spares an allocation per translated step, and e.Packet is valid until
// the next call with it.
func DecodeKernelHop(b []byte, i int, e *Event, scratch []byte) []byte {
	at := len(b) - hopsTailSize - (KernelHops(b)-i)*RecordSize
	hop := b[at : at+RecordSize]
	narrow.decode(hop, e, RecordSize)
	n := int(le.Uint16(b[offCaplen:]))
	if n == 0 || len(b) < RecordSize+n || !journeySteps[e.Point] {
		return scratch
	}
	e.Packet = b[RecordSize : RecordSize+n]
	carried := b[narrow.tuple:narrow.inner] // the tuple of the record's bytes
	if b[offFlags]&FlagInner != 0 && !e.HasInner() {
		// Decapsulated since the record's step: its packet is the one
		// inside the record's.
		carried = b[narrow.inner:narrow.ct]
		e.Packet = innerCarrying(e.Packet, carried)
		if e.Packet == nil {
			return scratch
		}
	}
	if !bytes.Equal(hop[narrow.tuple:narrow.inner], carried) {
		scratch = appendTranslated(scratch[:0], e.Packet, &e.Tuple)
		e.Packet = nil
		if len(scratch) > 0 {
			e.Packet = scratch
		}
	}
	return scratch
}

// innerCarrying returns the packet inside the vxlan packet b when its IPv4
// addresses are those of narrow tuple t (the kernel's bytes: source, then
// destination), or nil: bytes that hold another packet are not its.
func innerCarrying(b, t []byte) []byte {
	in := VXLANInner(b)
	if len(in) < 20 || in[0]>>4 != 4 || !bytes.Equal(in[12:20], t[:8]) {
		return nil
	}
	return in
}

// VXLANInner returns the packet inside the vxlan packet b, from its IP
// header, or nil when b is too short to hold the outer headers.
func VXLANInner(b []byte) []byte {
	hl, _, ok := TransportHeader(b)
	if !ok || len(b) < hl+vxlanInnerOff {
		return nil
	}
	return b[hl+vxlanInnerOff:]
}

// vxlanInnerOff is where the inner IP header starts past the outer
// transport header: UDP (8), vxlan (8) and Ethernet (14).
const vxlanInnerOff = 30

// journeySteps says, by point, whether a hop is a step of the record's
// packet, whose bytes it shares (each section's journeyStep). A TCP event
// joins the journey pending on its CPU as it came, with no packet bytes,
// as on its own.
var journeySteps = registeredJourneySteps()

func registeredJourneySteps() (steps [256]bool) {
	for p, s := range sections {
		if s != nil {
			steps[p] = s.journeyStep()
		}
	}
	return steps
}

// AppendKernelJourney appends the kernel record of a journey, as the kernel
// writes it: the first event with its packet bytes, then the others as
// hops. Every event is IPv4 (a narrow record), a step of the first's
// packet or a TCP event: for tests and tools that stand in for the kernel.
func AppendKernelJourney(dst []byte, journey []Event) []byte {
	rec := make([]byte, RecordSize+len(journey[0].Packet))
	head := len(dst)
	dst = append(dst, rec[:Encode(&journey[0], rec)]...)
	if len(journey) == 1 {
		return dst
	}
	dst[head+offFlags] |= flagHops
	for len(dst)%8 != 0 {
		dst = append(dst, 0)
	}
	for i := 1; i < len(journey); i++ {
		hop := journey[i]
		hop.Packet = nil
		dst = append(dst, rec[:Encode(&hop, rec)]...)
	}
	dst = le.AppendUint32(dst, uint32(len(journey)-1))
	return le.AppendUint32(dst, 0)
}

// appendTranslated appends to dst the bytes of an IPv4 packet, from its IP
// header, with the addresses and TCP or UDP ports of t and its checksums
// adjusted for the change (RFC 1624), as the kernel's NAT rewrites a
// packet: a journey's steps after a translation share the bytes of its
// first step. It appends nothing when the bytes are not the IPv4 packet of
// t's protocol. (A checksum left for the device to complete, on a packet
// sent from this host, is adjusted as a complete one: what Wireshark shows
// of it is as wrong as before.)
func appendTranslated(dst, pkt []byte, t *Tuple) []byte {
	if len(pkt) < 20 || pkt[0]>>4 != 4 || pkt[9] != t.Proto || !t.Src.Is4() || !t.Dst.Is4() {
		return dst
	}
	ihl := int(pkt[0]&0x0f) * 4
	if ihl < 20 || len(pkt) < ihl {
		return dst
	}
	dst = append(dst, pkt...)
	out := dst[len(dst)-len(pkt):]
	src, dstAddr := t.Src.As4(), t.Dst.As4()
	var addrs checksumDelta
	addrs.rewrite(out[12:16], src[:])
	addrs.rewrite(out[16:20], dstAddr[:])
	addrs.adjust(out[10:12])
	l4 := out[ihl:]
	if binary.BigEndian.Uint16(out[6:8])&0x1fff != 0 || len(l4) < 4 {
		return dst // a later fragment, or no ports captured
	}
	var sport, dport [2]byte
	binary.BigEndian.PutUint16(sport[:], t.Sport)
	binary.BigEndian.PutUint16(dport[:], t.Dport)
	ports := addrs
	ports.rewrite(l4[0:2], sport[:])
	ports.rewrite(l4[2:4], dport[:])
	switch {
	case t.Proto == ProtoTCP && len(l4) >= 18:
		ports.adjust(l4[16:18])
	case t.Proto == ProtoUDP && len(l4) >= 8 && binary.BigEndian.Uint16(l4[6:8]) != 0:
		// A UDP checksum of zero is none; one that comes to zero is sent
		// as all ones.
		ports.adjust(l4[6:8])
		if binary.BigEndian.Uint16(l4[6:8]) == 0 {
			binary.BigEndian.PutUint16(l4[6:8], 0xffff)
		}
	}
	return dst
}

// checksumDelta is the one's complement sum of the changes to the 16-bit
// words a checksum covers.
type checksumDelta uint32

// rewrite replaces field (whole 16-bit words) with to, adding the change.
func (d *checksumDelta) rewrite(field, to []byte) {
	for i := 0; i+1 < len(field); i += 2 {
		*d += checksumDelta(^binary.BigEndian.Uint16(field[i:]))
		*d += checksumDelta(binary.BigEndian.Uint16(to[i:]))
	}
	copy(field, to)
}

// adjust updates the checksum in sum for the changes: HC' = ~(~HC + ~m + m').
func (d checksumDelta) adjust(sum []byte) {
	c := uint32(^binary.BigEndian.Uint16(sum)) + uint32(d)
	for c > 0xffff {
		c = c&0xffff + c>>16
	}
	binary.BigEndian.PutUint16(sum, ^uint16(c))
}
