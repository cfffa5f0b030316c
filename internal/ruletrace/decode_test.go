package ruletrace

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// traceMessage encodes a trace message as the kernel sends one.
func traceMessage(t *testing.T, kind uint32, verdict int32, chain string, network, transport []byte) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.String(unix.NFTA_TRACE_TABLE, "nat")
	ae.String(unix.NFTA_TRACE_CHAIN, "KUBE-SERVICES")
	ae.Uint64(unix.NFTA_TRACE_RULE_HANDLE, 42)
	ae.Uint32(unix.NFTA_TRACE_TYPE, kind)
	ae.Uint32(unix.NFTA_TRACE_ID, 0xdeadbeef)
	ae.Uint32(unix.NFTA_TRACE_NFPROTO, unix.NFPROTO_IPV4)
	ae.Nested(unix.NFTA_TRACE_VERDICT, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.NFTA_VERDICT_CODE, uint32(verdict))
		if chain != "" {
			nae.String(unix.NFTA_VERDICT_CHAIN, chain)
		}
		return nil
	})
	if network != nil {
		ae.Bytes(unix.NFTA_TRACE_NETWORK_HEADER, network)
		ae.Bytes(unix.NFTA_TRACE_TRANSPORT_HEADER, transport)
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return append(genHeader(unix.NFPROTO_IPV4, 0), b...)
}

func TestDecodeStep(t *testing.T) {
	ip := make([]byte, 20)
	ip[0], ip[9] = 0x45, 6
	copy(ip[12:], []byte{10, 0, 0, 1})
	copy(ip[16:], []byte{10, 96, 0, 10})
	tcp := []byte{0x9c, 0x40, 0, 80, 0, 0, 0, 0}
	for _, tc := range []struct {
		name    string
		data    []byte
		verdict string
		packet  bool
	}{
		{"a jump, with the headers", traceMessage(t, 3, unix.NFT_JUMP, "KUBE-SVC-X", ip, tcp), "jump KUBE-SVC-X", true},
		{"an accept with a queue number's bits", traceMessage(t, 3, 1|0x10000, "", nil, nil), "accept", false},
		{"a return", traceMessage(t, 3, unix.NFT_RETURN, "", nil, nil), "return", false},
		{"a drop", traceMessage(t, 3, 0, "", nil, nil), "drop", false},
		{"a RETURN rule as older kernels report it", traceMessage(t, 2, unix.NFT_RETURN, "", nil, nil), "return", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := decodeStep(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if s.table != "nat" || s.chain != "KUBE-SERVICES" || s.handle != 42 || s.id != 0xdeadbeef || s.kind != ruleset.TraceRule ||
				s.verdict != tc.verdict || s.nfproto != unix.NFPROTO_IPV4 || s.hasPacket != tc.packet {
				t.Errorf("decoded %+v", s)
			}
			want := ruleset.Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.96.0.10"), Proto: 6, Sport: 40000, Dport: 80}
			if tc.packet && s.packet != want {
				t.Errorf("packet %+v, want %+v", s.packet, want)
			}
		})
	}
	// An IPv6 packet, its TCP header behind a hop-by-hop options header.
	ip6 := make([]byte, 48)
	ip6[0], ip6[6], ip6[40] = 0x60, unix.IPPROTO_HOPOPTS, 6
	copy(ip6[8:], netip.MustParseAddr("fd00::1").AsSlice())
	copy(ip6[24:], netip.MustParseAddr("fd00:96::10").AsSlice())
	want6 := ruleset.Packet{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00:96::10"), Proto: 6, Sport: 40000, Dport: 80}
	if s, err := decodeStep(traceMessage(t, 3, unix.NFT_JUMP, "KUBE-SVC-X", ip6, tcp)); err != nil || s.packet != want6 {
		t.Errorf("IPv6 packet %+v (%v), want %+v", s.packet, err, want6)
	}
	if _, err := decodeStep([]byte{2, 0}); err == nil {
		t.Error("a short message decoded")
	}
}

// TestTableRules: each filter becomes one rule per alternative in each
// entry chain of each family's table, a family's table only where the
// filter can select its packets, and one rule too many is refused.
func TestTableRules(t *testing.T) {
	for _, tc := range []struct {
		filter   string
		ip4, ip6 int // rules per chain; 0: no table
	}{
		{"", 1, 1},
		{"host 10.0.0.1", 2, 0},
		{"tcp and dst port 80", 2, 2},
		{"port 80", 4, 4},
		{"not port 80", 3, 3},
		// A family's table sees its own packets only: a host of the other
		// family never matches there, its negation always does.
		{"host fd00::1", 0, 2},
		{"host 10.0.0.1 or host fd00::1", 2, 2},
		{"not host fd00::1", 1, 1},
		{"ip6 and port 8443", 0, 4},
		{"net fd00::/8", 0, 2},
		{"(port 1 or port 2) and (port 3 or port 4) and (port 5 or port 6)", -1, -1},
	} {
		prog, err := filter.Compile(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		batches, err := tableMessages(prog)
		if tc.ip4 < 0 {
			if err == nil {
				t.Errorf("%q: %d tables, want an error", tc.filter, len(batches))
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.filter, err)
		}
		rules := map[uint8]int{}
		for _, b := range batches {
			for _, m := range b.messages {
				if m.Header.Type == netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWRULE) {
					if m.Data[0] != b.family.proto {
						t.Errorf("%q: a rule of family %d in the %s table", tc.filter, m.Data[0], b.family.name)
					}
					rules[b.family.proto]++
				}
			}
		}
		if rules[unix.NFPROTO_IPV4] != tc.ip4*len(entryHooks) || rules[unix.NFPROTO_IPV6] != tc.ip6*len(entryHooks) {
			t.Errorf("%q: %d ip and %d ip6 rules, want %d and %d in each of %d chains", tc.filter,
				rules[unix.NFPROTO_IPV4], rules[unix.NFPROTO_IPV6], tc.ip4, tc.ip6, len(entryHooks))
		}
	}
}
