// Package filter parses nettrace's pcap-filter style expressions and
// compiles them to the postfix program the BPF observation points evaluate
// on every packet tuple (struct nt_filter_insn). The same program is
// evaluated in Go by Match, so replayed recordings filter exactly as the
// kernel did.
//
// Supported: host, net (CIDR of either family, or "net A mask M"), port,
// portrange, with src, dst, "src or dst", "src and dst"; tcp, udp, icmp,
// icmp6, ip, ip6; and, or, not (also
// &&, ||, !), parentheses; a bare value after a primitive repeats its
// qualifiers ("port 80 or 443").
package filter

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// MaxInsns is the longest program the kernel evaluates (NT_FILTER_MAX).
const MaxInsns = 64

// Op is a filter instruction (enum nt_filter_op).
type Op uint8

// Instructions.
const (
	OpProto Op = 1
	OpHost  Op = 2
	OpPort  Op = 3
	OpAnd   Op = 4
	OpOr    Op = 5
	OpNot   Op = 6
)

// Dir selects which side of a tuple a primitive tests.
type Dir uint8

// Directions (NT_DIR_*).
const (
	DirAny Dir = 0
	DirSrc Dir = 1
	DirDst Dir = 2
)

// Insn is one instruction. A host or net is a prefix of its family; ip
// and ip6 are the family's whole space.
type Insn struct {
	Op      Op
	Dir     Dir
	Proto   uint8
	Port    uint16
	PortEnd uint16
	Net     netip.Prefix
}

// Words returns a host instruction's network and mask as the BPF side
// loads them (network-order bytes read as little-endian words; an IPv4
// network in the first word) and whether they are IPv6.
func (in Insn) Words() (addr, mask [4]uint32, ipv6 bool) {
	a := in.Net.Masked().Addr().As16()
	var m [16]byte
	for i := range in.Net.Bits() {
		m[i/8] |= 0x80 >> (i % 8)
	}
	if in.Net.Addr().Is4() {
		a = [16]byte(slices.Concat(a[12:], make([]byte, 12)))
	}
	for i := range addr {
		addr[i] = binary.LittleEndian.Uint32(a[4*i:])
		mask[i] = binary.LittleEndian.Uint32(m[4*i:])
	}
	return addr, mask, in.Net.Addr().Is6()
}

// Program is a compiled filter; the empty program matches everything.
type Program struct {
	Expr  string
	Insns []Insn
}

// Compile parses expr and compiles it. An empty expression matches all.
func Compile(expr string) (*Program, error) {
	p := &Program{Expr: expr}
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return p, nil
	}
	ps := &parser{toks: toks}
	n, err := ps.parseOr()
	if err != nil {
		return nil, err
	}
	if !ps.done() {
		return nil, ps.errorf("unexpected %q", ps.peek().text)
	}
	n.emit(&p.Insns)
	if len(p.Insns) > MaxInsns {
		return nil, fmt.Errorf("filter is too long for the kernel: %d instructions, at most %d (each host, net, port or protocol is one, each and, or and not one more): use a net for several hosts, a portrange for several ports", len(p.Insns), MaxInsns)
	}
	return p, nil
}

// Match evaluates the program on a tuple, as the kernel does.
func (p *Program) Match(t event.Tuple) bool {
	if len(p.Insns) == 0 {
		return true
	}
	var stack uint64
	for _, in := range p.Insns {
		switch in.Op {
		case OpAnd, OpOr:
			a, b := stack&1, (stack>>1)&1
			stack >>= 2
			r := a & b
			if in.Op == OpOr {
				r = a | b
			}
			stack = stack<<1 | r
		case OpNot:
			stack ^= 1
		default:
			var bit uint64
			if in.match(t) {
				bit = 1
			}
			stack = stack<<1 | bit
		}
	}
	return stack&1 == 1
}

func (in Insn) match(t event.Tuple) bool {
	var src, dst bool
	switch in.Op {
	case OpProto:
		return t.Proto == in.Proto
	case OpHost:
		src = in.Net.Contains(t.Src)
		dst = in.Net.Contains(t.Dst)
	case OpPort:
		if t.Proto != event.ProtoTCP && t.Proto != event.ProtoUDP {
			return false
		}
		src = t.Sport >= in.Port && t.Sport <= in.PortEnd
		dst = t.Dport >= in.Port && t.Dport <= in.PortEnd
	default:
		return false
	}
	switch in.Dir {
	case DirSrc:
		return src
	case DirDst:
		return dst
	}
	return src || dst
}
