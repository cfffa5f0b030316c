package event

import "encoding/binary"

// What a packet's first bytes (Event.Packet, from its IP header) say of
// it beyond its tuple.

// IPv6 extension headers walked to the transport header, as the kernel
// programs do (bpf/include/parse.h).
const (
	ipv6ExtMax      = 6
	ipv6HopByHop    = 0
	ipv6Routing     = 43
	ipv6Fragment    = 44
	ipv6Auth        = 51
	ipv6DestOptions = 60
)

// TransportHeader returns where the transport header starts in a packet prefix
// (past an IPv6 packet's extension headers) and the transport protocol.
func TransportHeader(b []byte) (int, uint8, bool) {
	if len(b) >= 40 && b[0]>>4 == 6 {
		hl, next := 40, b[6]
		for range ipv6ExtMax {
			if next != ipv6HopByHop && next != ipv6Routing && next != ipv6Fragment &&
				next != ipv6Auth && next != ipv6DestOptions {
				return hl, next, true
			}
			if len(b) < hl+8 {
				return 0, 0, false
			}
			n := hl
			switch next {
			case ipv6Fragment:
				hl += 8
			case ipv6Auth:
				hl += (int(b[n+1]) + 2) * 4
			default:
				hl += (int(b[n+1]) + 1) * 8
			}
			next = b[n]
		}
		return 0, 0, false
	}
	if len(b) < 20 || b[0]>>4 != 4 {
		return 0, 0, false
	}
	hl := int(b[0]&0x0f) * 4
	return hl, b[9], hl >= 20 && len(b) >= hl
}

// TCPSeqAck reads the sequence and acknowledgement numbers of a TCP
// segment's first bytes.
func TCPSeqAck(pkt []byte) (seq, ack uint32, ok bool) {
	hl, proto, ok := TransportHeader(pkt)
	if !ok || proto != ProtoTCP || len(pkt) < hl+12 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(pkt[hl+4:]), binary.BigEndian.Uint32(pkt[hl+8:]), true
}

// IPLength is a packet's length from its IP header: an IPv4 packet's
// total length, an IPv6 packet's payload length and fixed header. For a
// packet the stack still holds as one large segment (GSO), that is the
// whole of it, not the size of the packets it leaves as.
func IPLength(b []byte) (int, bool) {
	switch {
	case len(b) >= 40 && b[0]>>4 == 6:
		return 40 + int(binary.BigEndian.Uint16(b[4:])), true
	case len(b) >= 20 && b[0]>>4 == 4:
		return int(binary.BigEndian.Uint16(b[2:])), true
	}
	return 0, false
}

// DontFragment says whether no router may fragment the packet: an IPv4
// packet with DF set, as path MTU discovery sends them, or any IPv6 one.
func DontFragment(b []byte) bool {
	switch {
	case len(b) >= 40 && b[0]>>4 == 6:
		return true
	case len(b) >= 20 && b[0]>>4 == 4:
		return b[6]&0x40 != 0
	}
	return false
}

// ICMP messages by Tuple.Sport (type<<8 | code) that tell a sender its
// packet was too big for the path: IPv4's "fragmentation needed" and
// IPv6's "packet too big".
const (
	ICMPFragNeeded = 3<<8 | 4
	ICMPv6TooBig   = 2 << 8
)

// TooBigNotice says whether a tuple is an ICMP message telling its
// destination that a packet it sent was too big for the path.
func (t Tuple) TooBigNotice() bool {
	return (t.Proto == ProtoICMP && t.Sport == ICMPFragNeeded) || (t.Proto == ProtoICMPv6 && t.Sport == ICMPv6TooBig)
}
