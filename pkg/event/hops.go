package event

// A kernel record may carry its packet's next events (NT_F_HOPS, struct
// nt_journey in bpf/include/maps.h): the kernel gathers the steps of one
// packet in one shape (the same skb, identity, tuple and inner tuple) made
// one after the other on one CPU into one record, so that a packet
// crossing veth pairs, bridges and NAT hooks costs the ring buffer one
// record rather than one per step. The record is its own event and its
// packet's bytes, then the next events as narrow records (the hops), then
// their count. A hop carries its packet bytes no more: it takes the
// record's, taken at its first step (the same addresses and ports). A TCP
// event made on the CPU while the journey was pending (a socket's state
// changed as its packet was processed) joins it too, with no packet bytes:
// it has none on its own either.

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
// KernelHops(b)), its packet bytes the record's. e.Packet then refers into
// b, as with DecodeKernel.
func DecodeKernelHop(b []byte, i int, e *Event) {
	at := len(b) - hopsTailSize - (KernelHops(b)-i)*RecordSize
	narrow.decode(b[at:at+RecordSize], e, RecordSize)
	if n := int(le.Uint16(b[offCaplen:])); n > 0 && len(b) >= RecordSize+n && journeyStep(e.Point) {
		e.Packet = b[RecordSize : RecordSize+n]
	}
}

// journeyStep says whether a hop at point p is a step of the record's
// packet, whose bytes it shares (nt_journeys_point). A TCP event joins the
// journey pending on its CPU as it came, with no packet bytes, as on its
// own.
func journeyStep(p Point) bool {
	return p == PointDev || p == PointNAT || p == PointRoute || p == PointVXLAN
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
