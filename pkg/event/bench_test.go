package event

import (
	"net/netip"
	"testing"
)

func BenchmarkDecode(b *testing.B) {
	e := Event{Time: 1, Skb: 2, Netns: 3, Point: PointNAT, Kind: KindNAT, Flags: FlagCT | FlagPre,
		Tuple:  Tuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.96.0.10"), Sport: 1, Dport: 80, Proto: ProtoTCP},
		Packet: make([]byte, 128)}
	buf := make([]byte, RecordSize+128)
	Encode(&e, buf)
	var out Event
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := Decode(buf, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeWide is the live path's decode of a wide kernel record
// (an event with IPv6 addresses) with a packet prefix.
func BenchmarkDecodeWide(b *testing.B) {
	buf := make([]byte, WideRecordSize+128)
	buf[offPoint], buf[offKind], buf[offFlags] = byte(PointNAT), byte(KindNAT), FlagCT|FlagPre|flagWide
	le.PutUint16(buf[offCaplen:], 128)
	buf[wide.tuple+38] = 1 // IPv6
	copy(buf[wide.tuple:], []byte{0xfd, 0, 0, 1})
	var out Event
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := DecodeKernel(buf, &out); err != nil || !out.Tuple.Src.Is6() {
			b.Fatal(err)
		}
	}
}
