package probe

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// The decoder in package event reads fixed offsets; this checks them
// against the layout bpf2go generated from bpf/include/nettrace.h.
func TestEventLayoutMatchesBPF(t *testing.T) {
	if got := unsafe.Sizeof(natNtEvent{}); got != event.RecordSize {
		t.Fatalf("sizeof(nt_event) = %d, decoder expects %d", got, event.RecordSize)
	}
	var raw natNtEvent
	raw.Ts, raw.Skb, raw.Netns, raw.Ifindex = 11, 0xffff888012345678, 4026531840, 7
	raw.Point, raw.Kind, raw.Hook, raw.Flags = uint8(event.PointNAT), uint8(event.KindNAT), 3, event.FlagCT|event.FlagPre|event.FlagInner
	raw.Cpu, raw.Caplen = 1, 0
	copy(raw.Ifname[:], []int8{'e', 't', 'h', '0'})
	raw.Tuple.Saddr, raw.Tuple.Daddr, raw.Tuple.Sport, raw.Tuple.Dport, raw.Tuple.Proto, raw.Tuple.TcpFlags = 0x0100000a, 0x0200000a, 1234, 8080, 6, 0x12
	raw.Inner.Saddr, raw.Inner.Dport, raw.Inner.Proto = 0x0300000a, 53, 17
	raw.Ct.Id, raw.Ct.Status, raw.Ct.Mark, raw.Ct.Zone, raw.Ct.Ctinfo = 0xffff888000000100, 0x1a8, 0x4000, 9, 3
	raw.Ct.Orig.Daddr, raw.Ct.Orig.Dport = 0x0a00600a, 80
	raw.Ct.Reply.Saddr, raw.Ct.Reply.Sport = 0x0200000a, 8080
	raw.U.Nat.Pre.Daddr, raw.U.Nat.Pre.Dport, raw.U.Nat.Pre.Proto = 0x0a00600a, 80, 6
	raw.U.Nat.OutIfindex = 5
	copy(raw.U.Nat.OutIfname[:], []int8{'f', 'l', 'a', 'n', 'n', 'e', 'l', '.', '1'})

	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, raw); err != nil {
		t.Fatal(err)
	}
	var e event.Event
	if err := event.Decode(buf.Bytes(), &e); err != nil {
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
