package linkmtu

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// A too-big drop gets the MTU under its route's device, read in the
// drop's namespace, and its sender's, from the one namespace holding the
// sender's address; readings are reused while fresh, and other drops are
// left as they are.
func TestComplete(t *testing.T) {
	clock := time.Unix(1000, 0)
	lowerReads, lookups := 0, 0
	// Namespaces 42 (a node: vxlan device 4 over a device of MTU 1500)
	// and 43 (a pod: 10.244.2.10 on a device of MTU 1500); 10.0.0.1 is in
	// both, 10.0.0.9 in neither.
	holders := map[string]map[netip.Addr]uint16{
		"/run/netns/n2": {netip.MustParseAddr("10.0.0.1"): 1500},
		"/run/netns/p2": {netip.MustParseAddr("10.244.2.10"): 1500, netip.MustParseAddr("10.0.0.1"): 1450},
	}
	r := New(nil, func(reason uint32) string { return map[uint32]string{93: "PKT_TOO_BIG", 6: "NETFILTER_DROP"}[reason] })
	r.now = func() time.Time { return clock }
	r.lowerMTU = func(path string, ifindex uint32) (uint16, error) {
		lowerReads++
		if path != "/run/netns/n2" || ifindex != 4 {
			return 0, fmt.Errorf("no device %d in %s", ifindex, path)
		}
		return 1500, nil
	}
	r.addressMTU = func(path string, a netip.Addr) (uint16, bool, error) {
		lookups++
		mtu, ok := holders[path][a]
		return mtu, ok, nil
	}
	r.AddNamespace(netns.Target{Path: "/run/netns/n2", Inode: 42})
	r.AddNamespace(netns.Target{Path: "/run/netns/p2", Inode: 43})

	drop := func(reason uint32, netns uint32, src string) *event.Event {
		return &event.Event{Point: event.PointDrop, Kind: event.KindDrop, Netns: netns,
			Tuple: event.Tuple{Src: netip.MustParseAddr(src), Proto: event.ProtoTCP},
			Drop:  event.Drop{Reason: reason, DstIfindex: 4, DstMTU: 1450}}
	}
	tests := []struct {
		name                string
		e                   *event.Event
		after               time.Duration
		want                event.Drop
		lowerReads, lookups int
	}{
		{"too big, from a pod", drop(93, 42, "10.244.2.10"), 0,
			event.Drop{Reason: 93, DstIfindex: 4, DstMTU: 1450, LowerMTU: 1500, SrcMTU: 1500}, 1, 2},
		{"the readings reused while fresh", drop(93, 42, "10.244.2.10"), fresh / 2,
			event.Drop{Reason: 93, DstIfindex: 4, DstMTU: 1450, LowerMTU: 1500, SrcMTU: 1500}, 1, 2},
		{"read again once stale", drop(93, 42, "10.244.2.10"), fresh,
			event.Drop{Reason: 93, DstIfindex: 4, DstMTU: 1450, LowerMTU: 1500, SrcMTU: 1500}, 2, 4},
		{"a sender in two namespaces is not guessed", drop(93, 42, "10.0.0.1"), 0,
			event.Drop{Reason: 93, DstIfindex: 4, DstMTU: 1450, LowerMTU: 1500}, 2, 6},
		{"a sender in no namespace", drop(93, 42, "10.0.0.9"), 0,
			event.Drop{Reason: 93, DstIfindex: 4, DstMTU: 1450, LowerMTU: 1500}, 2, 8},
		{"a drop in a namespace not watched: its sender still looked for", drop(93, 44, "10.244.2.10"), 0,
			event.Drop{Reason: 93, DstIfindex: 4, DstMTU: 1450, SrcMTU: 1500}, 2, 8},
		{"another reason", drop(6, 42, "10.244.2.10"), 0, event.Drop{Reason: 6, DstIfindex: 4, DstMTU: 1450}, 2, 8},
	}
	for _, tt := range tests {
		clock = clock.Add(tt.after)
		r.Complete(tt.e)
		if tt.e.Drop != tt.want || lowerReads != tt.lowerReads || lookups != tt.lookups {
			t.Errorf("%s: %+v after %d device readings and %d address lookups; want %+v after %d and %d",
				tt.name, tt.e.Drop, lowerReads, lookups, tt.want, tt.lowerReads, tt.lookups)
		}
	}
}

// Past its budget a second, a sender is not looked for: its MTU stays
// unread until the next second.
func TestSenderLookupsAreBounded(t *testing.T) {
	clock := time.Unix(1000, 0)
	r := everyDropTooBig(&clock)
	read := 0
	for i := range lookupsPerSecond + 5 {
		e := &event.Event{Point: event.PointDrop, Netns: 1, Tuple: event.Tuple{Src: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})}}
		r.Complete(e)
		if e.Drop.SrcMTU != 0 {
			read++
		}
	}
	if read != lookupsPerSecond {
		t.Fatalf("%d senders read in one second, want %d", read, lookupsPerSecond)
	}
	clock = clock.Add(time.Second)
	e := &event.Event{Point: event.PointDrop, Netns: 1, Tuple: event.Tuple{Src: netip.MustParseAddr("10.1.0.1")}}
	if r.Complete(e); e.Drop.SrcMTU != 1500 {
		t.Fatalf("a sender the next second not read")
	}
}

// Readings no drop may use any more are forgotten: a long run with new
// senders every second keeps only the last second's, not every one.
func TestStaleReadingsAreForgotten(t *testing.T) {
	clock := time.Unix(1000, 0)
	r := everyDropTooBig(&clock)
	for second := range 100 {
		for i := range 3 {
			e := &event.Event{Point: event.PointDrop, Netns: 1, Tuple: event.Tuple{Src: netip.AddrFrom4([4]byte{10, 0, byte(second), byte(i)})},
				Drop: event.Drop{DstIfindex: uint32(second + 1)}}
			r.Complete(e)
		}
		clock = clock.Add(time.Second)
	}
	if len(r.sender) != 3 || len(r.lower) != 1 {
		t.Fatalf("after 100 seconds of 3 new senders through a new device each: %d senders and %d devices kept, want the last second's 3 and 1",
			len(r.sender), len(r.lower))
	}
}

// everyDropTooBig is a reader of namespace 1, where every drop is too big
// and every device and sender has MTU 1500, on clock.
func everyDropTooBig(clock *time.Time) *Reader {
	r := New([]netns.Target{{Path: "/run/netns/n", Inode: 1}}, func(uint32) string { return "PKT_TOO_BIG" })
	r.now = func() time.Time { return *clock }
	r.lowerMTU = func(string, uint32) (uint16, error) { return 1500, nil }
	r.addressMTU = func(string, netip.Addr) (uint16, bool, error) { return 1500, true, nil }
	return r
}
