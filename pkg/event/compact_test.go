package event

import (
	"net/netip"
	"reflect"
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
	for name, e := range cases {
		e.Packet = nil // never kept
		b := AppendCompact(nil, &e)
		var got Event
		n, err := DecodeCompact(b, &got)
		if err != nil || n != len(b) {
			t.Fatalf("%s: decoded %d of %d bytes: %v", name, n, len(b), err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, e)
		}
		for cut := 0; cut < len(b); cut++ {
			if _, err := DecodeCompact(b[:cut], &got); err != ErrCompactCorrupt {
				t.Fatalf("%s cut at %d of %d bytes: %v", name, cut, len(b), err)
			}
		}
		all = AppendCompact(all, &e)
		want = append(want, e)
	}
	for i := range want {
		var got Event
		n, err := DecodeCompact(all, &got)
		if err != nil || !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("event %d of a sequence: %v\n got %+v\nwant %+v", i, err, got, want[i])
		}
		all = all[n:]
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
		if n := len(AppendCompact(nil, &e)); n > limit {
			t.Errorf("%s: %d bytes compact, limit %d", name, n, limit)
		}
	}
}

func FuzzDecodeCompact(f *testing.F) {
	for _, e := range sampleEvents() {
		f.Add(AppendCompact(nil, &e))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		n, err := DecodeCompact(b, &e)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("decoded %d of %d bytes", n, len(b))
		}
		again := AppendCompact(nil, &e)
		var e2 Event
		if _, err := DecodeCompact(again, &e2); err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-encoded event differs: %v\n%+v\n%+v", err, e, e2)
		}
	})
}
