package explain

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestOrdinary(t *testing.T) {
	syn := fixture.T("10.244.1.10:40000", "10.244.2.10:8080", fixture.SYN)
	synAck := fixture.T("10.244.2.10:8080", "10.244.1.10:40000", fixture.SYNACK)
	igmp := event.Tuple{Src: netip.MustParseAddr("10.244.1.1"), Dst: netip.MustParseAddr("224.0.0.1"), Proto: 2}
	mdns := fixture.T("10.244.1.50:5353", "224.0.0.251:5353", 0)
	mdns.Proto = event.ProtoUDP
	at := func(e event.Event, loc uint64) event.Event { e.Drop.Location = loc; return e }
	cases := []struct {
		name   string
		events func(s *fixture.Seq) []event.Event
		want   string // for the last packet; "" when it is a true drop
	}{
		{"retransmitted SYN after the SYN-ACK", func(s *fixture.Seq) []event.Event {
			return []event.Event{
				fixture.Syn(s, 1, "n2/eth0", syn, event.SYNQueued, 0, 128),
				fixture.Dev(s, 2, "n2/eth0", event.KindDevTx, synAck),
				fixture.Dev(s, 3, "n2/eth0", event.KindDevRx, syn),
				at(fixture.Drop(s, 3, "n2/eth0", syn, "NOT_SPECIFIED"), fixture.TCPReceive),
			}
		}, "retransmitted SYN"},
		{"retransmitted SYN, its own step queued", func(s *fixture.Seq) []event.Event {
			return []event.Event{
				fixture.Syn(s, 3, "n2/eth0", syn, event.SYNQueued, 0, 128),
				at(fixture.Drop(s, 3, "n2/eth0", syn, "NOT_SPECIFIED"), fixture.TCPReceive),
			}
		}, "retransmitted SYN"},
		{"first SYN freed in TCP with no request held", func(s *fixture.Seq) []event.Event {
			return []event.Event{at(fixture.Drop(s, 3, "n2/eth0", syn, "NOT_SPECIFIED"), fixture.TCPReceive)}
		}, ""},
		{"SYN freed elsewhere after the SYN-ACK", func(s *fixture.Seq) []event.Event {
			return []event.Event{
				fixture.Syn(s, 1, "n2/eth0", syn, event.SYNQueued, 0, 128),
				fixture.Dev(s, 2, "n2/eth0", event.KindDevTx, synAck),
				fixture.Drop(s, 3, "n2/eth0", syn, "NOT_SPECIFIED"),
			}
		}, ""},
		{"retransmitted SYN dropped by a rule", func(s *fixture.Seq) []event.Event {
			return []event.Event{
				fixture.Syn(s, 1, "n2/eth0", syn, event.SYNQueued, 0, 128),
				fixture.Dev(s, 2, "n2/eth0", event.KindDevTx, synAck),
				at(fixture.Drop(s, 3, "n2/eth0", syn, "NETFILTER_DROP"), fixture.TCPReceive),
			}
		}, ""},
		{"IGMP to all hosts", func(s *fixture.Seq) []event.Event {
			return []event.Event{
				fixture.Dev(s, 4, "n1/cni0", event.KindDevRx, igmp),
				fixture.Drop(s, 4, "n1/cni0", igmp, "NOT_SPECIFIED"),
			}
		}, "multicast for a group"},
		{"IGMP dropped by a rule", func(s *fixture.Seq) []event.Event {
			return []event.Event{fixture.Drop(s, 4, "n1/cni0", igmp, "NETFILTER_DROP")}
		}, "IGMP: multicast group management"},
		// A bridge's querier's own MLD query, looped back to its host and
		// dropped by a reverse-path filter (incident 1's IPv6 lab).
		{"MLD query dropped by a rule", func(s *fixture.Seq) []event.Event {
			return []event.Event{
				fixture.Dev(s, 4, "n1/cni0", event.KindDevRx, mldQueryTuple),
				fixture.Drop(s, 4, "n1/cni0", mldQueryTuple, "NETFILTER_DROP"),
			}
		}, "MLD query: multicast group management"},
		{"mDNS dropped by a rule", func(s *fixture.Seq) []event.Event {
			return []event.Event{fixture.Drop(s, 4, "n1/cni0", mdns, "NETFILTER_DROP")}
		}, ""},
		{"ICMPv6 echo to all nodes dropped by a rule", func(s *fixture.Seq) []event.Event {
			return []event.Event{fixture.Drop(s, 4, "n1/cni0", allNodesEcho, "NETFILTER_DROP")}
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			flows := flowsOf(t, tc.events(&fixture.Seq{}))
			if len(flows) != 1 {
				t.Fatalf("%d flows, want 1", len(flows))
			}
			f := flows[0]
			got := Ordinary(f, len(f.Packets)-1, fixture.Context{})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Ordinary = %q, want %q", got, tc.want)
			}
		})
	}
}

var (
	// mldQueryTuple is a general MLD query as the tuple has it: type and
	// code in the source port, the maximum response delay (10 s) where an
	// echo's id would be.
	mldQueryTuple = event.Tuple{Src: netip.MustParseAddr("fe80::fcc3:90ff:fee3:f7c4"), Dst: netip.MustParseAddr("ff02::1"),
		Proto: event.ProtoICMPv6, Sport: mldQuery << 8, Dport: 10000}
	allNodesEcho = event.Tuple{Src: netip.MustParseAddr("fe80::1"), Dst: netip.MustParseAddr("ff02::1"),
		Proto: event.ProtoICMPv6, Sport: 128 << 8, Dport: 7}
)
