package event

import (
	"net/netip"
	"reflect"
	"testing"
)

// sampleEvents is one event of each point, with every section filled.
func sampleEvents() map[string]Event {
	ip := netip.MustParseAddr
	tup := Tuple{Src: ip("10.0.0.1"), Dst: ip("10.96.0.10"), Sport: 40000, Dport: 80, Proto: ProtoTCP, TCPFlags: 2}
	base := Event{Time: 42, Skb: 0xffff888000001000, Netns: 4026532000, Ifindex: 3, Kind: KindNAT, Hook: HookOutput, CPU: 1,
		Tuple: tup, Packet: []byte{0x45, 0, 0, 40}}
	copy(base.Ifname[:], "eth0")
	withCT := base
	withCT.Flags = FlagCT | FlagPre | FlagInner
	withCT.CT = Conntrack{ID: 7, Status: CTDstNAT | CTConfirmed, Mark: 0x4000, Zone: 2, Info: 3, Orig: tup, Reply: tup.Reverse()}
	withCT.Inner = tup.Reverse()
	cases := map[string]Event{}
	nat := withCT
	nat.Point, nat.NAT = PointNAT, NAT{Pre: tup, OutIfindex: 4}
	copy(nat.NAT.OutIfname[:], "flannel.1")
	cases["nat"] = nat
	route := base
	route.Point, route.Route = PointRoute, Route{Oif: 2, Gateway: ip("10.244.2.0"), Src: ip("10.0.0.1"), Err: -113, Table: 254}
	copy(route.Route.OifName[:], "eth0")
	cases["route"] = route
	vx := base
	vx.Point, vx.VXLAN = PointVXLAN, VXLAN{VNI: 1, Remote: ip("172.20.0.2"), Local: ip("172.20.0.1"), Port: 8472}
	cases["vxlan"] = vx
	syn := base
	syn.Point, syn.SYN = PointSYN, SYN{Listener: netip.MustParseAddrPort("10.244.1.10:8080"), Outcome: SYNDropAcceptQueue,
		AcceptQueue: 3, AcceptMax: 2, SYNQueue: 1, ListenDrops: 5, ListenOverfl: 4}
	cases["syn"] = syn
	drop := base
	drop.Point, drop.Drop = PointDrop, Drop{Location: 0xffffffff81000000, Reason: 31}
	cases["drop"] = drop
	tcp := base
	tcp.Point, tcp.TCP, tcp.Packet = PointTCP, TCP{OldState: 2, NewState: 7, Cookie: 0xffff8880}, nil
	cases["tcp, no packet"] = tcp

	tup6 := Tuple{Src: ip("fd00:10:244:1::50"), Dst: ip("fd00:10:96::10"), Sport: 40000, Dport: 80, Proto: ProtoTCP, TCPFlags: 2}
	nat6 := nat
	nat6.Tuple, nat6.Inner = tup6, Tuple{}
	nat6.Flags = FlagCT | FlagPre
	nat6.CT.Orig, nat6.CT.Reply = tup6, tup6.Reverse()
	nat6.NAT.Pre = tup6
	nat6.Packet = []byte{0x60, 0, 0, 0}
	cases["nat, IPv6"] = nat6
	vx6 := vx
	vx6.Flags, vx6.Inner = FlagInner, tup6 // IPv6 inside an IPv4 underlay
	cases["vxlan, IPv6 inside IPv4"] = vx6
	syn6 := syn
	syn6.Tuple, syn6.SYN.Listener = tup6, netip.MustParseAddrPort("[fd00:10:96::10]:80")
	cases["syn, IPv6"] = syn6
	route6 := route
	route6.Tuple, route6.Route.Gateway, route6.Route.Src = tup6, ip("fe80::1"), ip("fd00:10:244:1::50")
	cases["route, IPv6"] = route6
	return cases
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for name, e := range sampleEvents() {
		buf := make([]byte, RecordSize+MaxIPv6Block+len(e.Packet))
		n := Encode(&e, buf)
		if n != RecordedLen(&e) {
			t.Errorf("%s: %d bytes encoded, RecordedLen says %d", name, n, RecordedLen(&e))
		}
		if !e.Tuple.Src.Is6() && !e.Inner.Src.Is6() && n != RecordSize+len(e.Packet) {
			t.Errorf("%s: an IPv4 event takes %d bytes, %d before IPv6", name, n, RecordSize+len(e.Packet))
		}
		var got Event
		if err := Decode(buf[:n], &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, e)
		}
	}
	if err := Decode(make([]byte, RecordSize-1), new(Event)); err != ErrShortRecord {
		t.Errorf("short record: %v", err)
	}
}
