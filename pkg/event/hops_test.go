package event

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// journeySample is one packet's steps on one CPU: received, NAT hooks
// that translate nothing, a socket's state changed as it was processed,
// transmitted, with its packet's bytes.
func journeySample() []Event {
	tuple := Tuple{Src: netip.MustParseAddr("10.244.1.10"), Dst: netip.MustParseAddr("10.96.0.99"), Sport: 40000, Dport: 9000, Proto: 6, TCPFlags: 0x02}
	base := Event{Skb: 0xffff888100001000, SkbSeen: 1000, CPU: 1, Tuple: tuple, Hook: HookNone,
		Packet: []byte{0x45, 0, 0, 40, 1, 2, 3, 4, 5}}
	rx, nat, tx := base, base, base
	rx.Time, rx.Point, rx.Kind, rx.Netns, rx.Ifindex = 1000, PointDev, KindDevRx, 7, 3
	copy(rx.Ifname[:], "veth-q1")
	nat.Time, nat.Point, nat.Kind, nat.Hook, nat.Netns, nat.Flags = 1400, PointNAT, KindNAT, HookPrerouting, 7, FlagCT|FlagPre
	nat.CT = Conntrack{ID: 0xffff888200002000, Status: CTConfirmed, Orig: tuple, Reply: tuple.Reverse()}
	nat.NAT.Pre = tuple
	tx.Time, tx.Point, tx.Kind, tx.Netns, tx.Ifindex = 2100, PointDev, KindDevTx, 7, 4
	copy(tx.Ifname[:], "flannel.1")
	state := Event{Time: 1700, CPU: 1, Point: PointTCP, Kind: KindTCPState, Netns: 7, Tuple: tuple.Reverse(),
		TCP: TCP{OldState: 2, NewState: 1, Cookie: 4242}}
	return []Event{rx, nat, state, tx}
}

// A journey record decodes into its events, each step with the packet
// bytes of the first and a TCP event with none; a record without hops has
// none.
func TestKernelJourney(t *testing.T) {
	journey := journeySample()
	b := AppendKernelJourney(nil, journey)
	if n := KernelHops(b); n != len(journey)-1 {
		t.Fatalf("KernelHops = %d, want %d", n, len(journey)-1)
	}
	var e Event
	if err := DecodeKernel(b, &e); err != nil {
		t.Fatal(err)
	}
	got := []Event{e}
	for i := range KernelHops(b) {
		DecodeKernelHop(b, i, &e, nil)
		got = append(got, e)
	}
	for i := range journey {
		if journey[i].Point != PointTCP {
			journey[i].Packet = journey[0].Packet
		}
	}
	if !reflect.DeepEqual(got, journey) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, journey)
	}

	single := AppendKernelJourney(nil, journey[:1])
	if n := KernelHops(single); n != 0 {
		t.Errorf("a record without hops has %d", n)
	}
	// A count the record cannot hold is no hops, not a read past it.
	bad := append([]byte(nil), b...)
	bad[len(bad)-8] = 200
	if n := KernelHops(bad); n != 0 {
		t.Errorf("a count past the record's length gives %d hops", n)
	}
}

// Whatever a record holds, its hops decode within it.
func FuzzKernelHops(f *testing.F) {
	f.Add(AppendKernelJourney(nil, journeySample()))
	f.Add(AppendKernelJourney(nil, journeySample()[:1]))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		if DecodeKernel(b, &e) != nil {
			return
		}
		for i := range KernelHops(b) {
			DecodeKernelHop(b, i, &e, nil)
		}
	})
}

// serialized returns an IPv4 packet of proto between the tuple's addresses
// and ports, with a payload and its checksums computed by gopacket.
func serialized(t *testing.T, tu Tuple) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 63, Id: 0x1234, SrcIP: tu.Src.AsSlice(), DstIP: tu.Dst.AsSlice(),
		Protocol: layers.IPProtocol(tu.Proto)}
	var l4 gopacket.SerializableLayer
	switch tu.Proto {
	case ProtoTCP:
		tcp := &layers.TCP{SrcPort: layers.TCPPort(tu.Sport), DstPort: layers.TCPPort(tu.Dport), Seq: 7, SYN: true, Window: 64240}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		l4 = tcp
	case ProtoUDP:
		udp := &layers.UDP{SrcPort: layers.UDPPort(tu.Sport), DstPort: layers.UDPPort(tu.Dport)}
		_ = udp.SetNetworkLayerForChecksum(ip)
		l4 = udp
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, l4, gopacket.Payload("hello, endpoint")); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A step after a translation shares the record's bytes with the step's
// addresses and ports, its checksums those of the packet sent so.
func TestTranslatedPacket(t *testing.T) {
	for _, proto := range []uint8{ProtoTCP, ProtoUDP} {
		pre := Tuple{Src: netip.MustParseAddr("10.244.1.10"), Dst: netip.MustParseAddr("10.96.0.99"), Sport: 40000, Dport: 9000, Proto: proto}
		post := pre
		post.Dst, post.Dport = netip.MustParseAddr("10.244.2.10"), 9002
		post.Src = netip.MustParseAddr("172.20.0.1")
		got := appendTranslated(nil, serialized(t, pre), &post)
		if want := serialized(t, post); !reflect.DeepEqual(got, want) {
			t.Errorf("proto %d: translated\n%x\nwant\n%x", proto, got, want)
		}
		// Bytes cut inside the transport header: the addresses still are.
		if got := appendTranslated([]byte("kept"), serialized(t, pre)[:22], &post)[4:]; !reflect.DeepEqual(got[:20], serialized(t, post)[:20]) {
			t.Errorf("proto %d, 22 bytes: IP header %x", proto, got[:20])
		}
	}
	tcp := Tuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: ProtoTCP}
	udp := tcp
	udp.Proto = ProtoUDP
	if got := appendTranslated(nil, serialized(t, tcp), &udp); len(got) != 0 {
		t.Errorf("bytes of another protocol translated: %x", got)
	}
}

// A journey's step after a NAT translation decodes with the record's
// bytes translated, and one before it with them as they are.
func TestKernelJourneyTranslated(t *testing.T) {
	journey := journeySample()
	pre := journey[0].Tuple
	post := pre
	post.Dst, post.Dport = netip.MustParseAddr("10.244.2.10"), 9002
	for i := range journey {
		if journey[i].Point != PointTCP {
			journey[i].Packet = serialized(t, pre)
		}
	}
	journey[1].Tuple = post // the DNAT
	journey[3].Tuple = post
	b := AppendKernelJourney(nil, journey)
	var e Event
	for i, want := range [][]byte{serialized(t, post), nil, serialized(t, post)} {
		DecodeKernelHop(b, i, &e, nil)
		if !reflect.DeepEqual(e.Packet, want) {
			t.Errorf("hop %d: packet\n%x\nwant\n%x", i, e.Packet, want)
		}
	}
}

// encapsulated returns the vxlan packet, from its outer IP header, that
// carries inner between the nodes' underlay addresses.
func encapsulated(t *testing.T, inner []byte) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: 0x4321, SrcIP: []byte{172, 20, 0, 1}, DstIP: []byte{172, 20, 0, 2},
		Protocol: layers.IPProtocolUDP}
	udp := &layers.UDP{SrcPort: 51234, DstPort: 8472}
	_ = udp.SetNetworkLayerForChecksum(ip)
	eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, udp, &layers.VXLAN{ValidIDFlag: true, VNI: 1}, eth, gopacket.Payload(inner)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A journey's step after the decapsulation of the record's packet decodes
// with the packet inside the record's bytes, translated when NAT has
// changed it since; inner bytes that hold another packet are none.
func TestKernelJourneyDecapsulated(t *testing.T) {
	journey := journeySample()
	pre := journey[0].Tuple
	post := pre
	post.Dst, post.Dport = netip.MustParseAddr("10.244.2.10"), 9002
	outer := Tuple{Src: netip.MustParseAddr("172.20.0.1"), Dst: netip.MustParseAddr("172.20.0.2"), Sport: 51234, Dport: 8472, Proto: ProtoUDP}
	journey[0].Tuple, journey[0].Inner, journey[0].Flags = outer, pre, FlagInner
	journey[0].Packet = encapsulated(t, serialized(t, pre))
	journey[1].Tuple = post // decapsulated, then DNATed
	b := AppendKernelJourney(nil, journey)
	var e Event
	for i, want := range [][]byte{serialized(t, post), nil, serialized(t, pre)} {
		DecodeKernelHop(b, i, &e, nil)
		if !reflect.DeepEqual(e.Packet, want) {
			t.Errorf("hop %d: packet\n%x\nwant\n%x", i, e.Packet, want)
		}
	}

	other := pre
	other.Src = netip.MustParseAddr("10.244.1.11")
	journey[0].Packet = encapsulated(t, serialized(t, other))
	b = AppendKernelJourney(nil, journey)
	if DecodeKernelHop(b, 2, &e, nil); e.Packet != nil {
		t.Errorf("a step took the bytes of another inner packet: %x", e.Packet)
	}
}
