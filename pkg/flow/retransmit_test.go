package flow

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// TestRetransmittedSYNUnderANewEntry: a SYN that meets a stale socket is
// answered by a challenge ACK, the client resets, and conntrack re-creates
// the entry when the SYN is retransmitted: one connection, one flow. A new
// connection on the same port (another initial sequence number) under the
// new entry is another flow.
func TestRetransmittedSYNUnderANewEntry(t *testing.T) {
	const syn, ack, rst = 0x02, 0x10, 0x04
	for _, tc := range []struct {
		name     string
		isnAgain uint32
		flows    int
	}{
		{"the same SYN again", 100, 1},
		{"a new connection on the port", 200, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &synthesizer{r: rand.New(rand.NewSource(1)), now: 1e9, seen: map[uint64]uint64{}, skbs: []uint64{0x1000, 0x2000, 0x3000}}
			c := &synthConn{id: 1, sport: 40000, isn: 100, isnRep: 500, ct: 0xc1, cookie: 7}
			s.state(c, 7, 2, true)
			s.packet(c, false, syn, 100, 0)
			s.packet(c, true, ack, 900, 101) // the stale socket's challenge ACK
			s.packet(c, false, rst, 901, 0)
			c.ct = 0xc2
			s.packet(c, false, syn, tc.isnAgain, 0)
			s.packet(c, true, syn|ack, 500, tc.isnAgain+1)
			s.packet(c, false, ack, tc.isnAgain+1, 501)
			flows := 0
			count := func(*Flow) { flows++ }
			corr := New(DefaultConfig)
			for i := range s.events {
				corr.Add(&s.events[i], count)
			}
			corr.Flush(count)
			if flows != tc.flows {
				t.Errorf("%d flows, want %d", flows, tc.flows)
			}
		})
	}
}

// TestLateSYNACKOfAGivenUpConnection: a client gives up on a connection
// whose SYN-ACK is late (its dial timed out) and the next connection
// reuses the port: the first SYN-ACK arrives after the second SYN, under
// the same conntrack entry and tuple, and the client resets it. The late
// SYN-ACK acknowledges the first SYN, so it is the first connection's; the
// second connection's own SYN-ACK does not start a third flow.
func TestLateSYNACKOfAGivenUpConnection(t *testing.T) {
	const syn, ack, rst = 0x02, 0x10, 0x04
	// An address per packet: here packets are told apart by what they say,
	// not by where the kernel kept them.
	s := &synthesizer{r: rand.New(rand.NewSource(1)), now: 1e9, seen: map[uint64]uint64{}}
	next := s.packet
	addr := uint64(0x1000)
	packet := func(c *synthConn, reply bool, flags uint8, seq, ack uint32) {
		addr += 0x1000
		s.skbs = []uint64{addr}
		next(c, reply, flags, seq, ack)
	}
	first := &synthConn{id: 1, sport: 40000, isn: 100, isnRep: 500, ct: 0xc1, cookie: 7}
	second := &synthConn{id: 1, sport: 40000, isn: 2000, isnRep: 7000, ct: 0xc1, cookie: 8}
	s.state(first, 7, 2, true)
	packet(first, false, syn, 100, 0)
	packet(first, false, syn, 100, 0) // retransmitted
	s.state(first, 2, 7, true)        // the dial gave up
	s.state(second, 7, 2, true)
	packet(second, false, syn, 2000, 0)
	packet(first, true, syn|ack, 500, 101) // late, for the first SYN
	packet(second, false, rst, 101, 0)     // the client knows no such connection
	packet(second, true, syn|ack, 7000, 2001)
	packet(second, false, ack, 2001, 7001)
	s.state(second, 2, 1, true) // its socket's states join its packets
	// Each flow as its packets' TCP flags (a packet by its address, one
	// each): the late SYN-ACK is the only one to follow two SYNs.
	var flows []string
	corr := New(DefaultConfig)
	record := func(f *Flow) {
		var flags []string
		seen := map[uint64]bool{}
		for _, p := range f.Packets {
			if !seen[p.Skb] {
				seen[p.Skb] = true
				flags = append(flags, fmt.Sprintf("%#x", p.Head().Tuple.TCPFlags))
			}
		}
		flows = append(flows, strings.Join(flags, " "))
	}
	for i := range s.events {
		corr.Add(&s.events[i], record)
	}
	corr.Flush(record)
	slices.Sort(flows)
	// The client's reset is not told apart: it carries no sequence number
	// of a SYN, and joins the connection that holds the tuple.
	if want := []string{"0x2 0x2 0x12", "0x2 0x4 0x12 0x10"}; !slices.Equal(flows, want) {
		t.Errorf("flows by their packets' TCP flags: %q, want %q", flows, want)
	}
}

// TestFastOpenSYNACK: a Fast Open SYN carries data, and its SYN-ACK
// acknowledges the data too: it is still that SYN's answer.
func TestFastOpenSYNACK(t *testing.T) {
	const syn, ack = 0x02, 0x10
	s := &synthesizer{r: rand.New(rand.NewSource(1)), now: 1e9, seen: map[uint64]uint64{}, skbs: []uint64{0x1000}}
	c := &synthConn{id: 1, sport: 40000, isn: 100, isnRep: 500, ct: 0xc1, cookie: 7}
	s.packet(c, false, syn, 100, 0)
	s.packet(c, true, syn|ack, 500, 100+1+20) // 20 bytes of data in the SYN
	s.packet(c, false, ack, 121, 501)
	flows := 0
	count := func(*Flow) { flows++ }
	corr := New(DefaultConfig)
	for i := range s.events {
		corr.Add(&s.events[i], count)
	}
	corr.Flush(count)
	if flows != 1 {
		t.Errorf("%d flows, want 1", flows)
	}
}

// TestRefusedConnectOnAnOpenTuple: a connect from a port whose tuple an
// open connection holds is refused before it sends anything, and its
// socket's states (SYN-SENT, CLOSE) name the tuple with another cookie.
// The open connection's reset after them is still its own.
func TestRefusedConnectOnAnOpenTuple(t *testing.T) {
	const syn, ack, rst = 0x02, 0x10, 0x04
	s := &synthesizer{r: rand.New(rand.NewSource(1)), now: 1e9, seen: map[uint64]uint64{}, skbs: []uint64{0x1000, 0x2000, 0x3000}}
	open := &synthConn{id: 1, sport: 40000, isn: 100, isnRep: 500, cookie: 7}
	refused := &synthConn{id: 1, sport: 40000, cookie: 8}
	s.state(open, 7, 2, true)
	s.packet(open, false, syn, 100, 0)
	s.packet(open, true, syn|ack, 500, 101)
	s.state(open, 2, 1, true)
	s.state(refused, 7, 2, true)
	s.state(refused, 2, 7, true)
	s.packet(open, false, rst, 101, 0)
	var packets []int
	corr := New(DefaultConfig)
	count := func(f *Flow) { packets = append(packets, len(f.Packets)) }
	for i := range s.events {
		corr.Add(&s.events[i], count)
	}
	corr.Flush(count)
	slices.Sort(packets)
	if len(packets) != 2 || packets[0] != 0 {
		t.Errorf("flows with %v packets, want two: the connection with all its packets, and the refused socket's states alone", packets)
	}
}

// TestResetUnderTheNextConnectionsEntry: a client resets its connection
// and at once connects again from the same port; the server resets a
// segment of the old connection that came after the client's reset, and
// that reset crosses the new SYN between the nodes. On the client's node
// conntrack gives it the new connection's entry (the SYN reopened the old
// one): the reset is still the old connection's packet, whole, whenever
// its steps there come (a CPU may hold them past the client's drop, or
// past the new connection's SYN-ACK), and the new entry stays the new
// connection's.
func TestResetUnderTheNextConnectionsEntry(t *testing.T) {
	const syn, ack, psh, rst = 0x02, 0x10, 0x08, 0x04
	// The reset's steps on the node are replyPath's third and fourth.
	const nodeFrom, nodeTo = 2, 4
	for _, held := range []string{"none", "past the client's steps", "past the next SYN-ACK"} {
		t.Run(held, func(t *testing.T) {
			s := &synthesizer{r: rand.New(rand.NewSource(1)), now: 1e9, seen: map[uint64]uint64{}, skbs: []uint64{0x1000, 0x2000, 0x3000, 0x4000, 0x5000}}
			old := &synthConn{id: 1, sport: 40000, isn: 100, isnRep: 500, ct: 0xc1, cookie: 7}
			next := &synthConn{id: 2, sport: 40000, isn: 3000, isnRep: 7000, ct: 0xc2, cookie: 8}
			s.state(old, 7, 2, true)
			s.packet(old, false, syn, 100, 0)
			s.packet(old, true, syn|ack, 500, 101)
			s.packet(old, false, ack, 101, 501)
			s.state(old, 2, 1, true)
			s.packet(old, true, psh|ack, 501, 101)
			s.packet(old, false, rst|ack, 101, 507)
			s.state(old, 1, 7, true)
			s.state(next, 7, 2, true)
			synAt := len(s.events)
			s.packet(next, false, syn, 3000, 0)
			underNext := *old
			underNext.ct = next.ct
			resetAt := len(s.events)
			s.packet(&underNext, true, rst, 507, 0)
			synAckAt := len(s.events)
			s.packet(next, true, syn|ack, 7000, 3001)
			s.packet(next, false, ack, 3001, 7001)
			nextSYN := slices.Clone(s.events[synAt:resetAt])
			reset := slices.Clone(s.events[resetAt:synAckAt])
			rest := slices.Clone(s.events[synAckAt:])
			// The SYN reaches the server after the reset left it.
			serverFrom := len(requestPath) - 2
			for i := range nextSYN[serverFrom:] {
				nextSYN[serverFrom+i].Time = reset[1].Time + uint64(i+1)
			}
			in := slices.Concat(s.events[:synAt], nextSYN[:serverFrom], reset[:nodeFrom], nextSYN[serverFrom:])
			switch held {
			case "none":
				in = slices.Concat(in, reset[nodeFrom:], rest)
			case "past the client's steps":
				in = slices.Concat(in, reset[nodeTo:], reset[nodeFrom:nodeTo], rest)
			default:
				in = slices.Concat(in, reset[nodeTo:], rest, reset[nodeFrom:nodeTo])
			}
			requireOneConnectionPerFlow(t, in)
			corr := New(DefaultConfig)
			resets := 0
			whole := func(f *Flow) {
				for _, p := range f.Packets {
					if p.Events[0].CPU == old.id && p.Events[0].Tuple.TCPFlags == rst {
						resets++
						if len(p.Events) != len(replyPath) {
							t.Errorf("the reset is a packet of %d events in flow %d, want all %d", len(p.Events), f.ID, len(replyPath))
						}
					}
				}
			}
			for i := range in {
				corr.Add(&in[i], whole)
			}
			corr.Flush(whole)
			if resets != 1 {
				t.Errorf("the reset is %d packets, want one", resets)
			}
		})
	}
}
