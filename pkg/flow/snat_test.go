package flow

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// snatAt is an entry's first packet SNATed to 10.0.0.254 at POSTROUTING in
// n2, at kernel time at.
func snatAt(at, ct uint64, sport uint16) event.Event {
	pre := fixture.T("10.0.0.1:40000", "10.0.0.2:9000", fixture.SYN)
	pre.Sport = sport
	post := pre
	post.Src = netip.MustParseAddr("10.0.0.254")
	c := fixture.CT(ct, pre, post.Reverse(), 0, false)
	c.Info = 2 // IP_CT_NEW
	s := fixture.Seq{Now: at - 10_000}
	return fixture.NAT(&s, ct, "n2/eth1", event.HookPostrouting, pre, post, c)
}

func TestSNATsGiveTheLatestOtherEntryBefore(t *testing.T) {
	x := newSNATs(time.Second)
	for _, e := range []event.Event{snatAt(100, 1, 40000), snatAt(200, 2, 40000), snatAt(250, 2, 40000), snatAt(300, 3, 40000)} {
		x.add(&e)
	}
	post := snatAt(0, 0, 40000).Tuple
	n2 := fixture.Netns("n2")
	for _, tc := range []struct {
		ct, at uint64
		want   uint64 // the entry found, 0 for none
	}{
		{ct: 9, at: 1000, want: 3},
		{ct: 3, at: 1000, want: 2}, // never its own entry
		{ct: 9, at: 300, want: 2},  // only before the time asked
		{ct: 9, at: 100, want: 0},
	} {
		e, ok := x.Before(n2, post, tc.ct, tc.at)
		if got := map[bool]uint64{true: e.CT.ID}[ok]; got != tc.want {
			t.Errorf("Before(entry %d, at %d) = entry %d, want %d", tc.ct, tc.at, got, tc.want)
		}
	}
	if e, _ := x.Before(n2, post, 9, 1000); e.Time != 300 || e.NAT.Pre.Src != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("record %+v, want the packet as added", e)
	}
	// A retransmission of entry 2 (at 250) is not a record of its own.
	if n := len(x.byTuple[snatKeyOf(n2, post)]); n != 3 {
		t.Errorf("%d records, want 3", n)
	}
	other := snatAt(200, 4, 41000)
	other.Tuple.Dst = netip.MustParseAddr("10.0.0.9")
	x.add(&other)
	if _, ok := x.Before(n2, post, 4, 1000); !ok {
		t.Error("another tuple's entry hid this one's")
	}
	// Not SNATed, or not the entry's first packet: not kept.
	unchanged := snatAt(400, 5, 40000)
	unchanged.Tuple.Src = unchanged.NAT.Pre.Src
	established := snatAt(400, 6, 40000)
	established.CT.Info = 0
	y := newSNATs(time.Second)
	y.add(&unchanged)
	y.add(&established)
	if len(y.order) != 0 {
		t.Errorf("kept %d records of packets SNAT did not give a new entry", len(y.order))
	}
}

func TestSNATsForgetPastTheHorizonAndTheCap(t *testing.T) {
	x := newSNATs(time.Second)
	first := snatAt(1000, 1, 40000)
	x.add(&first)
	late := snatAt(1000+uint64(minSNATHorizon)+1, 2, 40001)
	x.add(&late)
	if _, ok := x.Before(first.Netns, first.Tuple, 9, ^uint64(0)); ok {
		t.Error("a record past the horizon was kept")
	}
	y := newSNATs(time.Second)
	for i := range uint64(maxSNATs + 10) {
		e := snatAt(1000+i, 1+i, uint16(i))
		e.Tuple.Dport += uint16(i >> 16) // past 65535 ports, another server's
		y.add(&e)
	}
	if n := len(y.order) - y.first; n != maxSNATs || len(y.byTuple) != maxSNATs {
		t.Errorf("%d records in order, %d tuples, want %d", n, len(y.byTuple), maxSNATs)
	}
	oldest := snatAt(1000, 1, 0)
	if _, ok := y.Before(oldest.Netns, oldest.Tuple, 0, ^uint64(0)); ok {
		t.Error("the oldest record outlived the cap")
	}
}
