package flow

import (
	"math/rand"
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
