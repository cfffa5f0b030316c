package flow

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// TestStrayACKRacingTheNextSYN: a client resets its connection and dials
// again from the same port at once. The old connection's handshake ACK,
// overtaken by its reset, reaches the server's node with the next
// connection's SYN: both create a conntrack entry there, the ACK's is
// confirmed first, and the SYN is dropped (a conntrack clash). The server,
// without a socket for the ACK, answers it with a reset, which the new
// socket drops. Then the SYN is retransmitted and the connection is made.
// Two connections, two flows in the client's namespace.
func TestStrayACKRacingTheNextSYN(t *testing.T) {
	var s fixture.Seq
	c := func(flags uint8) event.Tuple { return fixture.T("10.244.1.50:40000", "10.244.2.10:9000", flags) }
	r := func(flags uint8) event.Tuple { t := c(0).Reverse(); t.TCPFlags = flags; return t }
	ct := func(id uint64, confirmed, reply bool) *event.Conntrack {
		status := event.CTStatus(0)
		if confirmed {
			status = event.CTConfirmed
		}
		return fixture.CT(id, c(0), r(0), status, reply)
	}
	seq := func(e event.Event, seq, ack uint32) event.Event {
		e.Packet = fixture.TCPPacket(e.Tuple, uint16(e.Skb>>8), seq, ack)
		return e
	}
	var evs []event.Event
	// walk writes a packet's hops from..to along devices (the client's
	// pod's, the node's two, the server's pod's, in the packet's order),
	// its tuple t, its entry on the node e.
	walk := func(skb uint64, t event.Tuple, sq, ack uint32, e *event.Conntrack, devs [4]string, from, to int) {
		steps := []event.Event{
			fixture.Dev(&s, skb, devs[0], event.KindDevTx, t),
			fixture.Dev(&s, skb, devs[1], event.KindDevRx, t),
			fixture.NAT(&s, skb, "n2", event.HookPrerouting, t, t, e),
			fixture.NAT(&s, skb, "n2", event.HookPostrouting, t, t, e),
			fixture.Dev(&s, skb, devs[2], event.KindDevTx, t),
			fixture.Dev(&s, skb, devs[3], event.KindDevRx, t),
		}
		for _, step := range steps[from:to] {
			evs = append(evs, seq(step, sq, ack))
		}
	}
	request := func(skb uint64, flags uint8, sq, ack uint32, e *event.Conntrack, from, to int) {
		walk(skb, c(flags), sq, ack, e, [4]string{"p1/eth0", "n2/veth1", "n2/veth2", "p2/eth0"}, from, to)
	}
	reply := func(skb uint64, flags uint8, sq, ack uint32, e *event.Conntrack, to int) {
		walk(skb, r(flags), sq, ack, e, [4]string{"p2/eth0", "n2/veth2", "n2/veth1", "p1/eth0"}, 0, to)
	}
	state := func(sock uint64, from, to uint8) {
		evs = append(evs, fixture.State(&s, sock, "p1", c(0), from, to))
	}
	const oldSock, newSock = 0x51, 0x52
	// The old connection: handshake, reset.
	state(oldSock, fixture.StateClose, fixture.StateSynSent)
	request(0x100, fixture.SYN, 100, 0, ct(0xa0, false, false), 0, 6)
	reply(0x200, fixture.SYNACK, 500, 101, ct(0xa0, true, true), 6)
	state(oldSock, fixture.StateSynSent, 1)
	request(0x300, fixture.RST, 101, 0, ct(0xa0, true, false), 0, 6)
	state(oldSock, 1, fixture.StateClose)
	oldConn := len(evs)
	// The new connection's SYN, dropped by the clash with the stray ACK.
	state(newSock, fixture.StateClose, fixture.StateSynSent)
	request(0x400, fixture.SYN, 9000, 0, ct(0xb0, false, false), 0, 4)
	drop := fixture.Drop(&s, 0x400, "n2/veth2", c(fixture.SYN), "NETFILTER_DROP")
	drop.Flags |= event.FlagCT
	drop.CT = *ct(0xb0, false, false)
	evs = append(evs, seq(drop, 9000, 0))
	firstSYN := len(evs)
	// The old connection's handshake ACK, decapsulated on the node (its
	// first hop there), freed at the server without a socket.
	request(0x500, fixture.ACK, 101, 501, ct(0xc0, true, false), 1, 6)
	evs = append(evs, seq(fixture.Drop(&s, 0x500, "p2/lo", c(fixture.ACK), "NOT_SPECIFIED"), 101, 501))
	// The server's reset for it, dropped by the new socket.
	reply(0x600, fixture.RST, 501, 0, ct(0xc0, true, true), 6)
	evs = append(evs, seq(fixture.Drop(&s, 0x600, "p1/lo", r(fixture.RST), "NOT_SPECIFIED"), 501, 0))
	stray := len(evs)
	// A second later, the retransmitted SYN, and the connection.
	s.Skip(1_000_000_000)
	request(0x700, fixture.SYN, 9000, 0, ct(0xd0, false, false), 0, 6)
	reply(0x800, fixture.SYNACK, 7000, 9001, ct(0xd0, true, true), 6)
	state(newSock, fixture.StateSynSent, 1)
	request(0x900, fixture.RST, 9001, 0, ct(0xd0, true, false), 0, 6)
	state(newSock, 1, fixture.StateClose)

	// Each event carries its connection in CPU, which correlation ignores.
	for i := range evs {
		evs[i].CPU = 1
		if (i >= oldConn && i < firstSYN) || i >= stray {
			evs[i].CPU = 2
		}
	}
	flowsOf := map[uint32]int{}
	var flows []string
	corr := New(DefaultConfig)
	done := func(f *Flow) {
		conns := map[uint32]bool{}
		desc := fmt.Sprintf("flow %d:", f.ID)
		for _, e := range f.Events() {
			conns[e.CPU] = true
			desc += fmt.Sprintf(" %#x@%s(conn %d)", e.Tuple.TCPFlags, fixture.NetnsNames[e.Netns], e.CPU)
		}
		for c := range conns {
			flowsOf[c]++
		}
		if len(conns) > 1 {
			t.Errorf("a flow holds both connections")
		}
		flows = append(flows, desc)
	}
	for i := range evs {
		corr.Add(&evs[i], done)
	}
	corr.Flush(done)
	if flowsOf[1] != 1 || flowsOf[2] != 1 {
		t.Errorf("the old connection in %d flows, the new one in %d, want one each:\n%s", flowsOf[1], flowsOf[2], strings.Join(flows, "\n"))
	}
}
