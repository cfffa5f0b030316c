package flow

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// withSeq gives an event the first bytes of its packet, as the kernel's
// snapshot carries them, with a TCP sequence number and IP id.
func withSeq(e event.Event, id uint16, seq uint32) event.Event {
	e.Packet = fixture.TCPPacket(e.Tuple, id, seq, 0)
	return e
}

// unreachable is an ICMP host unreachable from router about quoted.
func unreachable(s *fixture.Seq, skb uint64, where, router string, quoted event.Tuple) event.Event {
	t := fixture.T(router+":0", quoted.Src.String()+":0", 0)
	t.Proto, t.Sport, t.Dport = event.ProtoICMP, icmpUnreachable<<8|1, 0
	e := fixture.Dev(s, skb, where, event.KindDevTx, t)
	b := make([]byte, 20+8+28)
	copy(b, fixture.TCPPacket(t, 9, 0, 0)[:20])
	b[9] = event.ProtoICMP
	b[20] = icmpUnreachable
	q := b[28:]
	copy(q, fixture.TCPPacket(quoted, 7, 1, 0)[:20])
	binary.BigEndian.PutUint16(q[20:], quoted.Sport)
	binary.BigEndian.PutUint16(q[22:], quoted.Dport)
	e.Packet = b
	return e
}

// encapSnapshot gives an encapsulation event the bytes its point captures:
// the inner packet alone (a tunnel function, before the outer headers
// exist) or after the outer IP, UDP, vxlan and Ethernet headers (a device).
func encapSnapshot(e event.Event, id uint16, seq uint32, outer bool) event.Event {
	inner := fixture.TCPPacket(e.Inner, id, seq, 0)
	if !outer {
		e.Packet = inner
		return e
	}
	b := append(fixture.TCPPacket(e.Tuple, 77, 0, 0)[:20], make([]byte, 30)...)
	b[9] = event.ProtoUDP
	e.Packet = append(b, inner...)
	return e
}

func TestIdentities(t *testing.T) {
	var s fixture.Seq
	a := fixture.T("10.0.0.1:1000", "10.0.0.2:80", fixture.SYN)
	group := func(src string) event.Tuple {
		t := fixture.T(src+":0", "224.0.0.1:0", 0)
		t.Proto = 2 // IGMP
		return t
	}
	igmp := group("10.0.0.1")
	withCT := func(e event.Event, ct *event.Conntrack) event.Event {
		e.Flags |= event.FlagCT
		e.CT = *ct
		return e
	}
	state := func(cookie uint64, t event.Tuple, from, to uint8) event.Event {
		e := fixture.State(&s, 0, "p1", t, from, to)
		e.TCP.Cookie = cookie
		return e
	}
	tests := []struct {
		name           string
		events         []event.Event
		flows          int
		contradictions uint64
	}{
		{"one tuple in two namespaces, nothing joining them", []event.Event{
			fixture.Dev(&s, 0x1, "p1/eth0", event.KindDevTx, a),
			fixture.Dev(&s, 0x2, "p2/eth0", event.KindDevTx, a),
		}, 2, 0},
		{"a packet crossing namespaces joins them", []event.Event{
			fixture.Dev(&s, 0x3, "p1/eth0", event.KindDevTx, a),
			fixture.Dev(&s, 0x3, "n1/veth", event.KindDevRx, a),
			fixture.Dev(&s, 0x4, "n1/eth0", event.KindDevTx, a),
		}, 1, 0},
		{"a conntrack address freed and reused for another connection", []event.Event{
			withCT(fixture.Dev(&s, 0x5, "n1/cni0", event.KindDevTx, igmp), fixture.CT(0xc1, igmp, igmp.Reverse(), 0, false)),
			withCT(fixture.Dev(&s, 0x6, "n1/eth0", event.KindDevTx, a), fixture.CT(0xc1, a, a.Reverse(), event.CTConfirmed, false)),
		}, 2, 0},
		{"a multicast datagram's conntrack entry joins nothing", []event.Event{
			withCT(fixture.Dev(&s, 0x7, "n1/cni0", event.KindDevTx, igmp), fixture.CT(0xc2, igmp, igmp.Reverse(), event.CTConfirmed, false)),
			withCT(fixture.Dev(&s, 0x8, "n1/veth", event.KindDevTx, group("10.0.0.3")),
				fixture.CT(0xc2, igmp, igmp.Reverse(), event.CTConfirmed, false)),
		}, 2, 0},
		{"a source port reused by a new connection (new ISN)", []event.Event{
			withSeq(fixture.Dev(&s, 0x9, "p1/eth0", event.KindDevTx, a), 1, 1000),
			withSeq(fixture.Dev(&s, 0xa, "p1/eth0", event.KindDevTx, a), 2, 5000),
		}, 2, 1},
		{"a retransmitted SYN (same ISN) is the same connection", []event.Event{
			withSeq(fixture.Dev(&s, 0xb, "p1/eth0", event.KindDevTx, a), 1, 1000),
			withSeq(fixture.Dev(&s, 0xc, "p1/eth0", event.KindDevTx, a), 2, 1000),
		}, 1, 0},
		{"a new socket at a freed one's tuple", []event.Event{
			state(101, a, 2, 1),
			state(101, a, 1, 7),
			state(102, fixture.T("10.0.0.1:0", "10.0.0.2:80", 0), 7, 2), // not yet bound
			state(102, a, 2, 1),
		}, 2, 1},
		{"a tunnel function's snapshot is the inner packet, a device's the outer", []event.Event{
			withSeq(fixture.Dev(&s, 0x10, "n1/flannel.1", event.KindDevTx, a), 3, 1000),
			encapSnapshot(fixture.Encap(&s, 0x10, "n1/eth0", a, "172.20.0.1", "172.20.0.2", 1), 3, 1000, false),
			encapSnapshot(fixture.Encap(&s, 0x10, "n1/eth0", a, "172.20.0.1", "172.20.0.2", 1), 3, 1000, true),
		}, 1, 0},
		{"an ICMP error joins the flow of the packet it quotes", []event.Event{
			fixture.Dev(&s, 0xd, "n1/eth0", event.KindDevTx, a),
			unreachable(&s, 0xe, "n1/eth0", "10.0.0.254", a),
		}, 1, 0},
	}
	for _, tt := range tests {
		c, flows := run(DefaultConfig, tt.events)
		if len(flows) != tt.flows || c.Stats().Contradictions != tt.contradictions {
			t.Errorf("%s: %d flows, %d contradictions; want %d, %d", tt.name, len(flows), c.Stats().Contradictions,
				tt.flows, tt.contradictions)
		}
	}
}

// The bytes a connection's facts are read from: the packet, or the one it
// encapsulates, whichever the point captured; never bytes that hold
// neither tuple.
func TestConnBytes(t *testing.T) {
	var s fixture.Seq
	a := fixture.T("10.0.0.1:1000", "10.0.0.2:80", fixture.SYN)
	enc := fixture.Encap(&s, 0x1, "n1/eth0", a, "172.20.0.1", "172.20.0.2", 1)
	plain := withSeq(fixture.Dev(&s, 0x1, "n1/flannel.1", event.KindDevTx, a), 3, 1000)
	stale := plain
	stale.Tuple = fixture.T("10.0.0.9:1000", "10.0.0.2:80", fixture.SYN)
	tests := []struct {
		name string
		e    event.Event
		want bool // the bytes of the connection's packet are found
	}{
		{"a packet", plain, true},
		{"a tunnel function's snapshot: the inner packet", encapSnapshot(enc, 3, 1000, false), true},
		{"a device's snapshot: outer headers first", encapSnapshot(enc, 3, 1000, true), true},
		{"bytes of another packet", stale, false},
	}
	for _, tt := range tests {
		b := connBytes(&tt.e)
		want := tt.e.Tuple
		if tt.e.HasInner() {
			want = tt.e.Inner
		}
		if got := carries(b, want); got != tt.want {
			t.Errorf("%s: found %v, want %v", tt.name, got, tt.want)
		}
		if seq, _, ok := event.TCPSeqAck(b); tt.want && (!ok || seq != 1000) {
			t.Errorf("%s: sequence %d (%v), want 1000", tt.name, seq, ok)
		}
	}
}

// IPv6: addresses that differ anywhere give different keys, and an
// echo's request and reply share theirs.
func TestIPv6Identity(t *testing.T) {
	pkt := make([]byte, 40+20)
	pkt[0], pkt[6] = 0x60, event.ProtoTCP
	src, dst := netip.MustParseAddr("fd00:10:244:1::50"), netip.MustParseAddr("fd00:10:244:2::10")
	copy(pkt[8:24], src.AsSlice())
	copy(pkt[24:40], dst.AsSlice())
	if !carries(pkt, event.Tuple{Src: src, Dst: dst}) || carries(pkt, event.Tuple{Src: dst, Dst: src}) {
		t.Error("carries does not read the IPv6 addresses")
	}
	conn := event.Tuple{Src: src, Dst: dst, Sport: 40000, Dport: 80, Proto: event.ProtoTCP}
	for _, other := range []string{"fd00:10:244:1::51", "fd01:10:244:1::50", "10.244.1.50"} {
		o := conn
		o.Src = netip.MustParseAddr(other)
		if tupleKey(1, o) == tupleKey(1, conn) {
			t.Errorf("%s and %s share a key", o.Src, conn.Src)
		}
	}
	req := event.Tuple{Src: src, Dst: dst, Sport: icmp6EchoRequest << 8, Dport: 7, Proto: event.ProtoICMPv6}
	reply := event.Tuple{Src: dst, Dst: src, Sport: icmp6EchoReply << 8, Dport: 7, Proto: event.ProtoICMPv6}
	if tupleKey(1, req) != tupleKey(1, reply) {
		t.Error("an ICMPv6 echo request and its reply have different keys")
	}
}
