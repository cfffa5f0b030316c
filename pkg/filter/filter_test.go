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

func TestCompileErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"host", "host needs a value"},
		{"host 300.1.1.1", `host needs an IPv4 address, got "300.1.1.1"`},
		{"port http", `port needs a number`},
		{"(tcp", "missing )"},
		{"tcp)", `unexpected ")"`},
		{"tcp and", "expression ends too early"},
		{"frobnicate", `expected host, net, port`},
		{"portrange 9-1", "portrange needs LOW-HIGH"},
		{"net 10.0.0.0/40", "net needs an IPv4 CIDR"},
		{"host ::1", "IPv4"},
		{"tcp & udp", `unexpected '&'`},
		{strings.Repeat("port 1 or ", 40) + "port 2", "too long"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%q) = %v, want error containing %q", tt.expr, err, tt.want)
		}
	}
}
