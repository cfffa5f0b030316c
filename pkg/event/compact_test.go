package event

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"unsafe"
)

func TestCompactRoundTrip(t *testing.T) {
	cases := sampleEvents()
	ipv6 := cases["vxlan"]
	ipv6.VXLAN.Remote = netip.MustParseAddr("2001:db8::2")
	cases["vxlan, IPv6 underlay"] = ipv6
	unset := cases["route"]
	unset.Route.Gateway, unset.Route.Src = netip.Addr{}, netip.Addr{}
	cases["route, no gateway"] = unset
	var all []byte
	var want []Event
	var written CompactBase
	for name, e := range cases {
		e.Packet = nil // never kept
		b := AppendCompact(nil, &e, &CompactBase{})
		var got Event
		n, err := DecodeCompact(b, 0, &got, &CompactBase{})
		if err != nil || n != len(b) {
			t.Fatalf("%s: decoded %d of %d bytes: %v", name, n, len(b), err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, e)
		}
		for cut := 0; cut < len(b); cut++ {
			if _, err := DecodeCompact(b[:cut], 0, &got, &CompactBase{}); err != ErrCompactCorrupt {
				t.Fatalf("%s cut at %d of %d bytes: %v", name, cut, len(b), err)
			}
		}
		all = AppendCompact(all, &e, &written)
		want = append(want, e)
	}
	var read CompactBase
	off := 0
	for i := range want {
		var got Event
		n, err := DecodeCompact(all, off, &got, &read)
		if err != nil || !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("event %d of a sequence: %v\n got %+v\nwant %+v", i, err, got, want[i])
		}
		off += n
	}
}

// TestCompactIsSmall keeps the point of the form: even an event with
// every section is a quarter of an Event, plus the 12 bytes each IPv6
// address takes beyond an IPv4 one.
func TestCompactIsSmall(t *testing.T) {
	for name, e := range sampleEvents() {
		limit := int(unsafe.Sizeof(Event{})) / 4
		for _, a := range e.addrs() {
			if a.Is6() {
				limit += 12
			}
		}
		if n := len(AppendCompact(nil, &e, &CompactBase{})); n > limit {
			t.Errorf("%s: %d bytes compact, limit %d", name, n, limit)
		}
	}
}

func FuzzDecodeCompact(f *testing.F) {
	for _, e := range sampleEvents() {
		f.Add(AppendCompact(nil, &e, &CompactBase{}))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		n, err := DecodeCompact(b, 0, &e, &CompactBase{})
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("decoded %d of %d bytes", n, len(b))
		}
		again := AppendCompact(nil, &e, &CompactBase{})
		var e2 Event
		if _, err := DecodeCompact(again, 0, &e2, &CompactBase{}); err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-encoded event differs: %v\n%+v\n%+v", err, e, e2)
		}
	})
}

// TestCompactSequence: in a sequence, an event that shares its skb, device
// or conntrack entry with the one before is written without them, whether
// it comes later or earlier in time, and reads back whole.
func TestCompactSequence(t *testing.T) {
	samples := sampleEvents()
	names := slices.Sorted(maps.Keys(samples))
	var seq []Event
	var prevCT *Conntrack
	for i, name := range names {
		e := samples[name]
		e.Packet = nil
		if i > 0 && i%3 != 0 {
			prev := seq[i-1]
			e.Skb, e.SkbSeen = prev.Skb, prev.SkbSeen
			e.Netns, e.Ifindex, e.Ifname = prev.Netns, prev.Ifindex, prev.Ifname
			e.Time = prev.Time + 1500
			if i%2 == 0 {
				e.Time = prev.Time - 700 // another CPU's event, read later
			}
			if prevCT != nil && e.Flags&FlagCT != 0 {
				e.CT = *prevCT
			}
		}
		if e.Flags&FlagCT != 0 {
			prevCT = &e.CT
		}
		seq = append(seq, e)
	}
	var written, read CompactBase
	var all []byte
	standalone := 0
	for i := range seq {
		all = AppendCompact(all, &seq[i], &written)
		standalone += len(AppendCompact(nil, &seq[i], &CompactBase{}))
	}
	if len(all) >= standalone {
		t.Errorf("sequence of %d events: %d bytes, no less than %d standalone", len(seq), len(all), standalone)
	}
	off := 0
	for i := range seq {
		var got Event
		n, err := DecodeCompact(all, off, &got, &read)
		if err != nil || !reflect.DeepEqual(got, seq[i]) {
			t.Fatalf("event %d (%s) of the sequence: %v\n got %+v\nwant %+v", i, names[i], err, got, seq[i])
		}
		off += n
	}
	for cut := 0; cut < len(all); cut++ {
		if err := decodeAll(all[:cut], len(seq)); err != ErrCompactCorrupt {
			t.Fatalf("sequence cut at %d of %d bytes: %v", cut, len(all), err)
		}
	}
	if off != len(all) {
		t.Errorf("%d bytes left after the sequence", len(all)-off)
	}
}

// decodeAll decodes n events of a sequence.
func decodeAll(seq []byte, n int) error {
	var base CompactBase
	var e Event
	off := 0
	for i := 0; i < n; i++ {
		l, err := DecodeCompact(seq, off, &e, &base)
		if err != nil {
			return err
		}
		off += l
	}
	return nil
}
