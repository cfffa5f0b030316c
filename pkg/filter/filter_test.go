package filter

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

func tcp(src string, sport uint16, dst string, dport uint16) event.Tuple {
	return event.Tuple{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Sport: sport, Dport: dport, Proto: event.ProtoTCP}
}

func TestMatch(t *testing.T) {
	svc := tcp("172.20.0.1", 40000, "10.96.0.10", 80)
	pod := tcp("10.244.2.10", 8080, "172.20.0.1", 40000)
	icmp := event.Tuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: event.ProtoICMP}
	svc6 := tcp("fd00:10:244:1::50", 40000, "fd00:10:96::10", 80)
	ping6 := event.Tuple{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), Proto: event.ProtoICMPv6}
	tests := []struct {
		expr string
		t    event.Tuple
		want bool
	}{
		{"", svc, true},
		{"tcp", svc, true},
		{"udp", svc, false},
		{"ip", icmp, true},
		{"host 10.96.0.10", svc, true},
		{"host 10.96.0.11", svc, false},
		{"src host 10.96.0.10", svc, false},
		{"dst host 10.96.0.10", svc, true},
		{"src 172.20.0.1", svc, true},
		{"net 10.244.0.0/16", pod, true},
		{"net 10.244.0.0 mask 255.255.0.0", pod, true},
		{"src net 10.244.0.0/16", svc, false},
		{"port 80", svc, true},
		{"port 8080 or 443", pod, true},
		{"port 81 or 443", svc, false},
		{"dst port 40000", pod, true},
		{"src port 40000", pod, false},
		{"portrange 8000-8100", pod, true},
		{"tcp port 80", svc, true},
		{"udp port 80", svc, false},
		{"port 80", icmp, false},
		{"icmp", icmp, true},
		{"tcp and host 10.96.0.10 and port 80", svc, true},
		{"tcp and host 10.96.0.10 and port 81", svc, false},
		{"not port 80", svc, false},
		{"! port 81", svc, true},
		{"host 1.1.1.1 or (tcp && dst port 80)", svc, true},
		{"(host 1.1.1.1 or host 10.96.0.10) and not udp", svc, true},
		{"src or dst host 10.96.0.10", svc, true},
		{"src and dst host 10.96.0.10", svc, false},
		{"not (port 80 or port 40000)", svc, false},
		{"host 10.96.0.10 || host 10.244.2.10", pod, true},
		{"ip", svc6, false},
		{"ip6", svc6, true},
		{"ip6", svc, false},
		{"host fd00:10:96::10", svc6, true},
		{"dst host fd00:10:96::10", svc6, true},
		{"src host fd00:10:96::10", svc6, false},
		{"net fd00:10:244::/48", svc6, true},
		{"src net fd00:10:244:2::/64", svc6, false},
		{"net fd00::/8 and port 80", svc6, true},
		{"net 0.0.0.0/0", svc6, false},
		{"icmp6", ping6, true},
		{"icmp", ping6, false},
		{"host 10.96.0.10 or host fd00:10:96::10", svc6, true},
	}
	for _, tt := range tests {
		p, err := Compile(tt.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.expr, err)
			continue
		}
		if got := p.Match(tt.t); got != tt.want {
			t.Errorf("%q on %v: got %v, want %v (program %+v)", tt.expr, tt.t, got, tt.want, p.Insns)
		}
	}
}

// The words the kernel compares: network-order bytes read as
// little-endian words, an IPv4 network in the first.
func TestWords(t *testing.T) {
	tests := []struct {
		net        string
		addr, mask [4]uint32
		ipv6       bool
	}{
		{"10.244.0.0/16", [4]uint32{0x0000f40a}, [4]uint32{0x0000ffff}, false},
		{"0.0.0.0/0", [4]uint32{}, [4]uint32{}, false},
		{"fd00:1::/40", [4]uint32{0x010000fd}, [4]uint32{0xffffffff, 0x000000ff}, true},
		{"::1/128", [4]uint32{0, 0, 0, 0x01000000}, [4]uint32{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)}, true},
	}
	for _, tt := range tests {
		addr, mask, ipv6 := Insn{Op: OpHost, Net: netip.MustParsePrefix(tt.net)}.Words()
		if addr != tt.addr || mask != tt.mask || ipv6 != tt.ipv6 {
			t.Errorf("%s: %#x/%#x ipv6=%v, want %#x/%#x ipv6=%v", tt.net, addr, mask, ipv6, tt.addr, tt.mask, tt.ipv6)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"host", "host needs a value"},
		{"host 300.1.1.1", `host needs an IPv4 or IPv6 address, got "300.1.1.1"`},
		{"host fe80::1%eth0", `host needs an IPv4 or IPv6 address`},
		{"port http", `port needs a number`},
		{"(tcp", "missing )"},
		{"tcp)", `unexpected ")"`},
		{"tcp and", "expression ends too early"},
		{"frobnicate", `expected host, net, port`},
		{"portrange 9-1", "portrange needs LOW-HIGH"},
		{"net 10.0.0.0/40", "net needs a CIDR"},
		{"net fd00:: mask ffff::", "net with a mask needs an IPv4 network"},
		// What pcap-filter has and this filter does not: named as such.
		{"tcp & udp", `position 5: bitwise operators (&, |) are not supported yet`},
		{"tcp[tcpflags] & tcp-syn != 0", "position 4: byte-offset expressions such as tcp[13] or tcp[tcpflags] are not supported yet"},
		{"ether host 00:11:22:33:44:55", "link-layer filters (ether, vlan, mpls, arp) are not supported yet"},
		{"greater 100", "packet lengths (len, greater, less) are not supported yet"},
		{"tcp and proto 47", "protocols by number (proto N) are not supported yet"},
		// Host bits and masks checked as tcpdump checks them.
		{"net 10.0.0.1/8", "net 10.0.0.1/8 has host bits set: the network is 10.0.0.0/8 (or, for one host, host 10.0.0.1)"},
		{"net fd00::1/64", "has host bits set: the network is fd00::/64"},
		{"net 10.0.0.0 mask 255.0.255.0", "mask 255.0.255.0 is not contiguous"},
		{"net 10.1.0.0 mask 255.0.0.0", "net 10.1.0.0 mask 255.0.0.0 has host bits set: the network is 10.0.0.0"},
		// The limit named, and the filter not echoed back.
		{strings.Repeat("port 1 or ", 40) + "port 2", "too long for the kernel: 81 instructions, at most 64"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%q) = %v, want error containing %q", tt.expr, err, tt.want)
		}
		if err != nil && len(tt.expr) > 40 && strings.Contains(err.Error(), tt.expr[:40]) {
			t.Errorf("Compile(%q) = %v: the error repeats the filter", tt.expr, err)
		}
	}
}
