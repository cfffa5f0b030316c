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
	if _, err := decodeStep([]byte{2, 0}); err == nil {
		t.Error("a short message decoded")
	}
}

// TestTableRules: each filter becomes one rule per alternative in each
// entry chain, and one too many is refused.
func TestTableRules(t *testing.T) {
	for _, tc := range []struct {
		filter string
		rules  int // per chain
	}{
		{"", 1},
		{"host 10.0.0.1", 2},
		{"tcp and dst port 80", 2},
		{"port 80", 4},
		{"not port 80", 3},
		// The table sees IPv4 only: an IPv6 host never matches there, its
		// negation always does.
		{"host fd00::1", 0},
		{"host 10.0.0.1 or host fd00::1", 2},
		{"not host fd00::1", 1},
		{"(port 1 or port 2) and (port 3 or port 4) and (port 5 or port 6)", -1},
	} {
		prog, err := filter.Compile(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := tableMessages(prog)
		if tc.rules < 0 {
			if err == nil {
				t.Errorf("%q: %d messages, want an error", tc.filter, len(msgs))
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.filter, err)
		}
		rules := 0
		for _, m := range msgs {
			if m.Header.Type == netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWRULE) {
				rules++
			}
		}
		if rules != tc.rules*len(entryHooks) {
			t.Errorf("%q: %d rules, want %d in each of %d chains", tc.filter, rules, tc.rules, len(entryHooks))
		}
	}
}
