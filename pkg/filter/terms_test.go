package filter

import (
	"net/netip"
	"testing"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// TestAlternativesMatchAsProgram checks that the normal form matches
// exactly the tuples the program does.
func TestAlternativesMatchAsProgram(t *testing.T) {
	exprs := []string{
		"",
		"host 10.0.0.1",
		"not host 10.0.0.1",
		"tcp and dst port 80",
		"not (port 80 or 53) and src net 10.0.0.0/8",
		"udp or icmp",
		"not (host 10.0.0.1 and not port 80)",
		"src host 10.0.0.1 and dst host 10.0.0.2 or portrange 30000-32767",
	}
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("192.168.1.1")}
	var tuples []event.Tuple
	for _, src := range addrs {
		for _, dst := range addrs {
			for _, proto := range []uint8{event.ProtoTCP, event.ProtoUDP, event.ProtoICMP} {
				for _, ports := range [][2]uint16{{40000, 80}, {80, 40000}, {53, 31000}, {1, 2}} {
					tuples = append(tuples, event.Tuple{Src: src, Dst: dst, Proto: proto, Sport: ports[0], Dport: ports[1]})
				}
			}
		}
	}
	for _, expr := range exprs {
		t.Run(expr, func(t *testing.T) {
			p, err := Compile(expr)
			if err != nil {
				t.Fatal(err)
			}
			alts, err := p.Alternatives(64)
			if err != nil {
				t.Fatal(err)
			}
			for _, tu := range tuples {
				if got, want := evalAlternatives(alts, tu), p.Match(tu); got != want {
					t.Errorf("%+v: alternatives say %v, program %v (%v)", tu, got, want, alts)
				}
			}
		})
	}
}

func evalAlternatives(alts [][]Term, tu event.Tuple) bool {
	for _, alt := range alts {
		all := true
		for _, term := range alt {
			if term.match(tu) == term.Not {
				all = false
			}
		}
		if all {
			return true
		}
	}
	return false
}

func TestAlternativesBounded(t *testing.T) {
	p, err := Compile("(port 1 or port 2 or port 3) and (port 4 or port 5 or port 6) and (port 7 or port 8 or port 9)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Alternatives(8); err == nil {
		t.Fatal("27 alternatives fit in 8")
	}
	if alts, err := p.Alternatives(27); err != nil || len(alts) != 27 {
		t.Fatalf("got %d alternatives, %v; want 27", len(alts), err)
	}
}
