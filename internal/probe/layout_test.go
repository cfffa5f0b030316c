package probe

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// flagWide is NT_F_WIDE: the record is a struct nt_event.
const flagWide = 0x40

// The decoder in package event reads fixed offsets; this checks them
// against the layout bpf2go generated from bpf/include/nettrace.h (the
// narrow record's are asserted in the header itself).
func TestEventLayoutMatchesBPF(t *testing.T) {
	if got := unsafe.Sizeof(natNtEvent{}); got != event.WideRecordSize {
		t.Fatalf("sizeof(nt_event) = %d, decoder expects %d", got, event.WideRecordSize)
	}
	var raw natNtEvent
	raw.Ts, raw.Skb, raw.Netns, raw.Ifindex = 11, 0xffff888012345678, 4026531840, 7
	raw.Point, raw.Kind, raw.Hook, raw.Flags = uint8(event.PointNAT), uint8(event.KindNAT), 3, event.FlagCT|event.FlagPre|event.FlagInner|flagWide
	raw.Cpu, raw.Caplen = 1, 0
	copy(raw.Ifname[:], []int8{'e', 't', 'h', '0'})
	raw.Tuple.Saddr[0], raw.Tuple.Daddr[0], raw.Tuple.Sport, raw.Tuple.Dport, raw.Tuple.Proto, raw.Tuple.TcpFlags = 0x0100000a, 0x0200000a, 1234, 8080, 6, 0x12
	raw.Inner.Saddr[0], raw.Inner.Dport, raw.Inner.Proto = 0x0300000a, 53, 17
	raw.Ct.Id, raw.Ct.Status, raw.Ct.Mark, raw.Ct.Zone, raw.Ct.Ctinfo = 0xffff888000000100, 0x1a8, 0x4000, 9, 3
	raw.Ct.Orig.Daddr[0], raw.Ct.Orig.Dport = 0x0a00600a, 80
	raw.Ct.Reply.Saddr[0], raw.Ct.Reply.Sport = 0x0200000a, 8080
	raw.U.Nat.Pre.Daddr[0], raw.U.Nat.Pre.Dport, raw.U.Nat.Pre.Proto = 0x0a00600a, 80, 6
	raw.U.Nat.OutIfindex = 5
	copy(raw.U.Nat.OutIfname[:], []int8{'f', 'l', 'a', 'n', 'n', 'e', 'l', '.', '1'})

	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, raw); err != nil {
		t.Fatal(err)
	}
	var e event.Event
	if err := event.DecodeKernel(buf.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr
	checks := []struct {
		name      string
		got, want any
	}{
		{"time", e.Time, uint64(11)},
		{"skb", e.Skb, uint64(0xffff888012345678)},
		{"netns", e.Netns, uint32(4026531840)},
		{"ifindex", e.Ifindex, uint32(7)},
		{"hook", e.Hook, event.HookOutput},
		{"cpu", e.CPU, uint32(1)},
		{"ifname", e.Ifname.String(), "eth0"},
		{"tuple", e.Tuple, event.Tuple{Src: ip("10.0.0.1"), Dst: ip("10.0.0.2"), Sport: 1234, Dport: 8080, Proto: 6, TCPFlags: 0x12}},
		{"inner", e.Inner, event.Tuple{Src: ip("10.0.0.3"), Dst: ip("0.0.0.0"), Dport: 53, Proto: 17}},
		{"ct id", e.CT.ID, uint64(0xffff888000000100)},
		{"ct status", e.CT.Status, event.CTStatus(0x1a8)},
		{"ct mark", e.CT.Mark, uint32(0x4000)},
		{"ct zone", e.CT.Zone, uint16(9)},
		{"ct reply dir", e.CT.IsReply(), true},
		{"ct orig dst", e.CT.Orig.Dst, ip("10.96.0.10")},
		{"ct reply src", e.CT.Reply.Src, ip("10.0.0.2")},
		{"nat pre", e.NAT.Pre.Dst, ip("10.96.0.10")},
		{"nat out ifindex", e.NAT.OutIfindex, uint32(5)},
		{"nat out dev", e.NAT.OutIfname.String(), "flannel.1"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// bpf2go renders the payload union by its first member only, so each
// payload's layout is checked against the BTF of the compiled object: a
// distinct value written at every member's offset must come out of Decode
// in the field that member feeds.
func TestEveryPayloadMatchesBPF(t *testing.T) {
	spec, err := loadNat()
	if err != nil {
		t.Fatal(err)
	}
	offsetOf := func(structName, member string) (int, int) {
		var st *btf.Struct
		if err := spec.Types.TypeByName(structName, &st); err != nil {
			t.Fatalf("%s: %v", structName, err)
		}
		for _, m := range st.Members {
			if m.Name == member {
				size, err := btf.Sizeof(m.Type)
				if err != nil {
					t.Fatal(err)
				}
				return int(m.Offset.Bytes()), size
			}
		}
		t.Fatalf("%s has no member %s", structName, member)
		return 0, 0
	}
	union, _ := offsetOf("nt_event", "u")
	addr := func(a netip.Addr) uint64 {
		if !a.Is4() {
			return 0
		}
		b := a.As4()
		return uint64(binary.LittleEndian.Uint32(b[:]))
	}
	type field struct {
		member string
		got    func(e *event.Event) uint64
	}
	payloads := []struct {
		point   event.Point
		flags   uint8
		payload string
		fields  []field
	}{
		{event.PointNAT, event.FlagPre, "nt_nat", []field{
			{"pre", func(e *event.Event) uint64 { return addr(e.NAT.Pre.Src) }},
			{"out_ifindex", func(e *event.Event) uint64 { return uint64(e.NAT.OutIfindex) }},
			{"out_ifname", func(e *event.Event) uint64 { return uint64(e.NAT.OutIfname[0]) }},
		}},
		{event.PointRoute, 0, "nt_route", []field{
			{"oif", func(e *event.Event) uint64 { return uint64(e.Route.Oif) }},
			{"gateway", func(e *event.Event) uint64 { return addr(e.Route.Gateway) }},
			{"saddr", func(e *event.Event) uint64 { return addr(e.Route.Src) }},
			{"err", func(e *event.Event) uint64 { return uint64(uint32(e.Route.Err)) }},
			{"table", func(e *event.Event) uint64 { return uint64(e.Route.Table) }},
			{"oifname", func(e *event.Event) uint64 { return uint64(e.Route.OifName[0]) }},
		}},
		{event.PointVXLAN, 0, "nt_vxlan", []field{
			{"vni", func(e *event.Event) uint64 { return uint64(e.VXLAN.VNI) }},
			{"remote", func(e *event.Event) uint64 { return addr(e.VXLAN.Remote) }},
			{"local", func(e *event.Event) uint64 { return addr(e.VXLAN.Local) }},
			{"port", func(e *event.Event) uint64 { return uint64(e.VXLAN.Port) }},
		}},
		{event.PointSYN, 0, "nt_syn", []field{
			{"laddr", func(e *event.Event) uint64 { return addr(e.SYN.Listener.Addr()) }},
			{"lport", func(e *event.Event) uint64 { return uint64(e.SYN.Listener.Port()) }},
			{"outcome", func(e *event.Event) uint64 { return uint64(e.SYN.Outcome) }},
			{"accept_qlen", func(e *event.Event) uint64 { return uint64(e.SYN.AcceptQueue) }},
			{"accept_max", func(e *event.Event) uint64 { return uint64(e.SYN.AcceptMax) }},
			{"syn_qlen", func(e *event.Event) uint64 { return uint64(e.SYN.SYNQueue) }},
			{"listen_overflows", func(e *event.Event) uint64 { return e.SYN.ListenOverfl }},
			{"listen_drops", func(e *event.Event) uint64 { return e.SYN.ListenDrops }},
		}},
		{event.PointDrop, 0, "nt_drop", []field{
			{"location", func(e *event.Event) uint64 { return e.Drop.Location }},
			{"reason", func(e *event.Event) uint64 { return uint64(e.Drop.Reason) }},
			{"ct_count", func(e *event.Event) uint64 { return uint64(e.Drop.CTCount) }},
			{"ct_max", func(e *event.Event) uint64 { return uint64(e.Drop.CTMax) }},
			{"ct_drops", func(e *event.Event) uint64 { return e.Drop.CTDrops }},
			{"dst_ifindex", func(e *event.Event) uint64 { return uint64(e.Drop.DstIfindex) }},
			{"dst_mtu", func(e *event.Event) uint64 { return uint64(e.Drop.DstMTU) }},
			{"lower_mtu", func(e *event.Event) uint64 { return uint64(e.Drop.LowerMTU) }},
			{"src_mtu", func(e *event.Event) uint64 { return uint64(e.Drop.SrcMTU) }},
		}},
		{event.PointTCP, 0, "nt_tcp", []field{
			{"oldstate", func(e *event.Event) uint64 { return uint64(e.TCP.OldState) }},
			{"newstate", func(e *event.Event) uint64 { return uint64(e.TCP.NewState) }},
			{"cookie", func(e *event.Event) uint64 { return e.TCP.Cookie }},
		}},
	}
	checked := map[event.Point]bool{event.PointDev: true} // dev events have no payload
	for _, p := range payloads {
		checked[p.point] = true
	}
	for _, p := range event.Points {
		if !checked[p] {
			t.Errorf("point %s: its payload is not checked against the BTF", p)
		}
	}
	for _, p := range payloads {
		for i, f := range p.fields {
			off, size := offsetOf(p.payload, f.member)
			rec := make([]byte, event.WideRecordSize)
			rec[24], rec[27] = byte(p.point), p.flags|flagWide
			want := uint64(0x21 + i)
			// Every byte of the member holds part of the value (a value
			// read from the wrong bytes comes out different).
			for b := 0; b < size && b < 8; b++ {
				rec[union+off+b] = byte(want >> (8 * b))
			}
			if size >= 2 {
				want |= uint64(0x5a) << 8
				rec[union+off+1] = 0x5a
			}
			if f.member == "out_ifname" || f.member == "oifname" || f.member == "outcome" || f.member == "oldstate" || f.member == "newstate" {
				want &= 0xff // one byte read
			}
			var e event.Event
			if err := event.DecodeKernel(rec, &e); err != nil {
				t.Fatal(err)
			}
			if got := f.got(&e); got != want {
				t.Errorf("%s.%s at offset %d: decoded %#x, want %#x", p.payload, f.member, union+off, got, want)
			}
		}
	}
	seen, _ := offsetOf("nt_event", "skb_seen")
	rec := make([]byte, event.WideRecordSize)
	rec[27] = flagWide
	binary.LittleEndian.PutUint64(rec[seen:], 0x1122334455667788)
	var e event.Event
	if err := event.DecodeKernel(rec, &e); err != nil {
		t.Fatal(err)
	}
	if e.SkbSeen != 0x1122334455667788 {
		t.Errorf("skb_seen at offset %d decoded as %#x", seen, e.SkbSeen)
	}
}
