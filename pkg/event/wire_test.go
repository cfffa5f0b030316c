package event

import (
	"net/netip"
	"testing"
)

// The transport header is found past IPv6 extension headers.
func TestTransportHeaderPastIPv6Extensions(t *testing.T) {
	pkt := make([]byte, 40+8+8+20)
	pkt[0], pkt[6] = 0x60, ipv6HopByHop
	pkt[40], pkt[41] = ipv6Fragment, 0 // hop-by-hop: 8 bytes, then a fragment header
	pkt[48] = ProtoTCP                 // first fragment (offset 0): the transport header follows
	if hl, proto, ok := TransportHeader(pkt); !ok || hl != 56 || proto != ProtoTCP {
		t.Errorf("TransportHeader = %d, %d, %v; want 56, tcp, true", hl, proto, ok)
	}
}

// A packet's length and DF flag from its header: IPv4's total length and
// flag, IPv6's payload length plus its header, never fragmented on the
// way.
func TestIPLengthAndDontFragment(t *testing.T) {
	v4 := []byte{0x45, 0, 0x05, 0xdc, 0xa1, 0xc8, 0x40, 0, 64, ProtoTCP, 0, 0, 10, 244, 2, 10, 10, 244, 1, 10}
	v4NoDF := append([]byte(nil), v4...)
	v4NoDF[6] = 0
	v6 := make([]byte, 40)
	v6[0], v6[4], v6[5] = 0x60, 0x05, 0xa0
	tests := []struct {
		name string
		pkt  []byte
		len  int
		ok   bool
		df   bool
	}{
		{"IPv4 with DF", v4, 1500, true, true},
		{"IPv4 without", v4NoDF, 1500, true, false},
		{"IPv6", v6, 1480, true, true},
		{"too short", v4[:12], 0, false, false},
	}
	for _, tt := range tests {
		l, ok := IPLength(tt.pkt)
		if l != tt.len || ok != tt.ok || DontFragment(tt.pkt) != tt.df {
			t.Errorf("%s: length %d (%v), DF %v; want %d (%v), %v", tt.name, l, ok, DontFragment(tt.pkt), tt.len, tt.ok, tt.df)
		}
	}
}

func TestTooBigNotice(t *testing.T) {
	a4, a6 := netip.MustParseAddr("10.244.2.10"), netip.MustParseAddr("fd00::10")
	tests := []struct {
		t    Tuple
		want bool
	}{
		{Tuple{Dst: a4, Proto: ProtoICMP, Sport: 3<<8 | 4}, true},
		{Tuple{Dst: a4, Proto: ProtoICMP, Sport: 3<<8 | 3}, false}, // port unreachable
		{Tuple{Dst: a6, Proto: ProtoICMPv6, Sport: 2 << 8}, true},
		{Tuple{Dst: a4, Proto: ProtoTCP, Sport: 3<<8 | 4}, false},
	}
	for _, tt := range tests {
		if got := tt.t.TooBigNotice(); got != tt.want {
			t.Errorf("%+v: %v, want %v", tt.t, got, tt.want)
		}
	}
}
