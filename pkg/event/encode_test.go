package event

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
)

// sampleEvents is each point's sample (its section's), with every common
// field set, and IPv6 variants of those with addresses in their payload.
func sampleEvents() map[string]Event {
	ip := netip.MustParseAddr
	tup := Tuple{Src: ip("10.0.0.1"), Dst: ip("10.96.0.10"), Sport: 40000, Dport: 80, Proto: ProtoTCP, TCPFlags: 2}
	base := Event{Time: 42, Skb: 0xffff888000001000, SkbSeen: 41, Netns: 4026532000, Ifindex: 3, Hook: HookOutput, CPU: 1,
		Tuple: tup, Packet: []byte{0x45, 0, 0, 40}}
	copy(base.Ifname[:], "eth0")
	base.Flags = FlagCT | FlagInner
	base.CT = Conntrack{ID: 7, Status: CTDstNAT | CTConfirmed, Mark: 0x4000, Zone: 2, Info: 3, Orig: tup, Reply: tup.Reverse()}
	base.Inner = tup.Reverse()
	cases := map[string]Event{}
	for _, p := range Points {
		if int(p) < len(sections) && sections[p] != nil {
			cases[p.String()] = sections[p].sample(base)
		}
	}

	tup6 := Tuple{Src: ip("fd00:10:244:1::50"), Dst: ip("fd00:10:96::10"), Sport: 40000, Dport: 80, Proto: ProtoTCP, TCPFlags: 2}
	base6 := base
	base6.Tuple, base6.Inner, base6.Flags = tup6, Tuple{}, FlagCT
	base6.CT.Orig, base6.CT.Reply = tup6, tup6.Reverse()
	base6.Packet = []byte{0x60, 0, 0, 0}
	cases["nat, IPv6"] = sections[PointNAT].sample(base6)
	cases["syn, IPv6"] = sections[PointSYN].sample(base6)
	route6 := sections[PointRoute].sample(base6)
	route6.Route.Gateway = ip("fe80::1")
	cases["route, IPv6"] = route6
	vx6 := sections[PointVXLAN].sample(base)
	vx6.Flags, vx6.Inner, vx6.CT = FlagInner, tup6, Conntrack{} // IPv6 inside an IPv4 underlay
	cases["vxlan, IPv6 inside IPv4"] = vx6
	return cases
}

// Every point has a section, whose sample is an event of the point with
// its payload set: a new point without one fails here, and one the hot
// paths' dispatch (section.go) misses fails the round trips of the samples.
func TestEveryPointHasASection(t *testing.T) {
	names := map[string]bool{}
	kindOf := map[Kind]Point{}
	for _, p := range Points {
		if n := p.String(); n == "" || names[n] || n == fmt.Sprintf("point(%d)", uint8(p)) {
			t.Errorf("point %d is named %q, empty, twice or not at all", uint8(p), n)
		}
		names[p.String()] = true
		if int(p) >= len(sections) || sections[p] == nil {
			t.Errorf("point %s has no section", p)
			continue
		}
		var zero Event
		e := sections[p].sample(zero)
		if e.Point != p || e.Kind == 0 {
			t.Errorf("point %s: sample is point %s, kind %d", p, e.Point, e.Kind)
		}
		for _, k := range sections[p].kinds() {
			if other, ok := kindOf[k.kind]; ok || k.name == "" {
				t.Errorf("point %s: kind %d (%q) is empty or also %s's", p, k.kind, k.name, other)
			}
			kindOf[k.kind] = p
		}
		if kindOf[e.Kind] != p {
			t.Errorf("point %s: its sample's kind %s is not one of its kinds", p, e.Kind)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for name, e := range sampleEvents() {
		buf := make([]byte, RecordSize+MaxIPv6Block+len(e.Packet))
		n := Encode(&e, buf)
		if n != RecordedLen(&e) {
			t.Errorf("%s: %d bytes encoded, RecordedLen says %d", name, n, RecordedLen(&e))
		}
		if !e.Tuple.Src.Is6() && !e.Inner.Src.Is6() && n != RecordSize+len(e.Packet) {
			t.Errorf("%s: an IPv4 event takes %d bytes, %d before IPv6", name, n, RecordSize+len(e.Packet))
		}
		var got Event
		if err := Decode(buf[:n], &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, e)
		}
	}
	if err := Decode(make([]byte, RecordSize-1), new(Event)); err != ErrShortRecord {
		t.Errorf("short record: %v", err)
	}
}
