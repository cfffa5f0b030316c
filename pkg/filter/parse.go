package filter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

type token struct {
	text string
	pos  int
}

// unsupported are what pcap-filter has and nettrace's filter does not
// yet: named, so that an error says what is missing rather than where
// parsing stopped.
var unsupported = map[string]string{
	"[": "byte-offset expressions such as tcp[13] or tcp[tcpflags]", "&": "bitwise operators (&, |)",
	"ether": "link-layer filters (ether, vlan, mpls, arp)", "vlan": "link-layer filters (ether, vlan, mpls, arp)",
	"mpls": "link-layer filters (ether, vlan, mpls, arp)", "arp": "link-layer filters (ether, vlan, mpls, arp)",
	"rarp": "link-layer filters (ether, vlan, mpls, arp)", "len": "packet lengths (len, greater, less)",
	"greater": "packet lengths (len, greater, less)", "less": "packet lengths (len, greater, less)",
	"broadcast": "broadcast and multicast", "multicast": "broadcast and multicast", "gateway": "gateway",
	"proto": "protocols by number (proto N)", "sctp": "SCTP", "inbound": "directions of a device (inbound, outbound)",
	"outbound": "directions of a device (inbound, outbound)",
}

// unsupportedError says which pcap-filter feature a filter uses that
// nettrace's does not support, and what it does support.
func unsupportedError(pos int, what string) error {
	return fmt.Errorf("filter: position %d: %s are not supported yet; the filter takes host, net, port, portrange, src/dst, tcp, udp, icmp, icmp6, ip, ip6, and/or/not and parentheses", pos+1, what)
}

func tokenize(s string) ([]token, error) {
	if i := strings.IndexByte(s, '['); i >= 0 {
		return nil, unsupportedError(i, unsupported["["])
	}
	var toks []token
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '(' || c == ')' || c == '!':
			toks = append(toks, token{string(c), i})
			i++
		case strings.HasPrefix(s[i:], "&&") || strings.HasPrefix(s[i:], "||"):
			toks = append(toks, token{s[i : i+2], i})
			i += 2
		default:
			j := i
			for j < len(s) && !unicode.IsSpace(rune(s[j])) && !strings.ContainsRune("()!&|", rune(s[j])) {
				j++
			}
			if j == i { // a lone & or |
				return nil, unsupportedError(i, unsupported["&"])
			}
			toks = append(toks, token{strings.ToLower(s[i:j]), i})
			i = j
		}
	}
	return toks, nil
}

type node interface{ emit(*[]Insn) }

type prim struct{ in Insn }
type unary struct{ x node }
type logical struct {
	op   Op
	l, r node
}

func (n prim) emit(out *[]Insn) { *out = append(*out, n.in) }
func (n unary) emit(out *[]Insn) {
	n.x.emit(out)
	*out = append(*out, Insn{Op: OpNot})
}
func (n logical) emit(out *[]Insn) {
	n.l.emit(out)
	n.r.emit(out)
	*out = append(*out, Insn{Op: n.op})
}

// qual is what a primitive's keywords said, kept so that a bare value can
// repeat it ("port 80 or 443").
type qual struct {
	dir   string // "", "src", "dst", "src or dst", "src and dst"
	kind  string // "host", "net", "port", "portrange"
	proto uint8
}

type parser struct {
	toks []token
	i    int
	last *qual
}

func (p *parser) done() bool  { return p.i >= len(p.toks) }
func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }
func (p *parser) is(w ...string) bool {
	if p.done() {
		return false
	}
	for _, x := range w {
		if p.toks[p.i].text == x {
			return true
		}
	}
	return false
}

func (p *parser) errorf(format string, args ...any) error {
	pos := 0
	if !p.done() {
		pos = p.toks[p.i].pos
	} else if len(p.toks) > 0 {
		last := p.toks[len(p.toks)-1]
		pos = last.pos + len(last.text)
	}
	return fmt.Errorf("filter: position %d: %s", pos+1, fmt.Sprintf(format, args...))
}

func (p *parser) parseOr() (node, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.is("or", "||") {
		p.next()
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = logical{OpOr, l, r}
	}
	return l, nil
}

func (p *parser) parseAnd() (node, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.is("and", "&&") {
		p.next()
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = logical{OpAnd, l, r}
	}
	return l, nil
}

func (p *parser) parseNot() (node, error) {
	if p.is("not", "!") {
		p.next()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return unary{x}, nil
	}
	return p.parsePrimary()
}

var protos = map[string]uint8{"tcp": event.ProtoTCP, "udp": event.ProtoUDP, "icmp": event.ProtoICMP, "icmp6": event.ProtoICMPv6}

// families are the whole address space of each family.
var families = map[string]netip.Prefix{"ip": netip.MustParsePrefix("0.0.0.0/0"), "ip6": netip.MustParsePrefix("::/0")}

func (p *parser) parsePrimary() (node, error) {
	if p.done() {
		return nil, p.errorf("expression ends too early")
	}
	if p.is("(") {
		p.next()
		n, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if !p.is(")") {
			return nil, p.errorf("missing )")
		}
		p.next()
		return n, nil
	}
	if net, ok := families[p.peek().text]; ok {
		p.next()
		return prim{Insn{Op: OpHost, Net: net}}, nil
	}
	q := qual{}
	if proto, ok := protos[p.peek().text]; ok {
		p.next()
		q.proto = proto
		if !p.is("src", "dst", "host", "net", "port", "portrange") {
			return prim{Insn{Op: OpProto, Proto: proto}}, nil
		}
	}
	if p.is("src", "dst") {
		q.dir = p.next().text
		if p.is("or", "and") && p.i+1 < len(p.toks) && p.toks[p.i+1].text != q.dir &&
			(p.toks[p.i+1].text == "src" || p.toks[p.i+1].text == "dst") {
			q.dir = "src " + p.next().text + " dst"
			p.next()
		}
	}
	if p.is("host", "net", "port", "portrange") {
		q.kind = p.next().text
	} else if q.dir == "" && q.proto == 0 && p.last != nil {
		q = *p.last // a bare value repeats the previous primitive's qualifiers
	} else if q.dir != "" {
		q.kind = "host" // "src 10.0.0.1" as in pcap
	} else if what, ok := unsupported[p.peek().text]; ok {
		return nil, unsupportedError(p.peek().pos, what)
	} else {
		return nil, p.errorf("expected host, net, port, portrange, tcp, udp, icmp, icmp6, ip, ip6, not or (, got %q", p.peek().text)
	}
	n, err := p.value(q)
	if err != nil {
		return nil, err
	}
	p.last = &q
	if q.proto != 0 {
		n = logical{OpAnd, prim{Insn{Op: OpProto, Proto: q.proto}}, n}
	}
	return n, nil
}

func (p *parser) value(q qual) (node, error) {
	if p.done() {
		return nil, p.errorf("%s needs a value", q.kind)
	}
	tok := p.next()
	var in Insn
	switch q.kind {
	case "host":
		a, err := netip.ParseAddr(tok.text)
		if err != nil || a.Zone() != "" {
			p.i--
			return nil, p.errorf("host needs an IPv4 or IPv6 address, got %q", tok.text)
		}
		in = Insn{Op: OpHost, Net: netip.PrefixFrom(a, a.BitLen())}
	case "net":
		pfx, err := p.network(tok)
		if err != nil {
			return nil, err
		}
		in = Insn{Op: OpHost, Net: pfx.Masked()}
	case "port":
		n, err := strconv.ParseUint(tok.text, 10, 16)
		if err != nil {
			p.i--
			return nil, p.errorf("port needs a number from 0 to 65535, got %q", tok.text)
		}
		in = Insn{Op: OpPort, Port: uint16(n), PortEnd: uint16(n)}
	case "portrange":
		lo, hi, ok := strings.Cut(tok.text, "-")
		a, err1 := strconv.ParseUint(lo, 10, 16)
		b, err2 := strconv.ParseUint(hi, 10, 16)
		if !ok || err1 != nil || err2 != nil || a > b {
			p.i--
			return nil, p.errorf("portrange needs LOW-HIGH, got %q", tok.text)
		}
		in = Insn{Op: OpPort, Port: uint16(a), PortEnd: uint16(b)}
	}
	switch q.dir {
	case "src":
		in.Dir = DirSrc
	case "dst":
		in.Dir = DirDst
	case "src and dst":
		s, d := in, in
		s.Dir, d.Dir = DirSrc, DirDst
		return logical{OpAnd, prim{s}, prim{d}}, nil
	}
	return prim{in}, nil
}

func (p *parser) network(tok token) (netip.Prefix, error) {
	if strings.Contains(tok.text, "/") {
		pfx, err := netip.ParsePrefix(tok.text)
		if err != nil {
			p.i--
			return netip.Prefix{}, p.errorf("net needs a CIDR (10.0.0.0/8, fd00::/8), got %q", tok.text)
		}
		if pfx.Masked() != pfx {
			// As tcpdump: a host's address with a prefix length is a
			// mistake (a host meant, or another network).
			p.i--
			return netip.Prefix{}, p.errorf("net %s has host bits set: the network is %s (or, for one host, host %s)", tok.text, pfx.Masked(), pfx.Addr())
		}
		return pfx, nil
	}
	a, err := netip.ParseAddr(tok.text)
	if err != nil || a.Zone() != "" {
		p.i--
		return netip.Prefix{}, p.errorf("net needs a network, got %q", tok.text)
	}
	if !p.is("mask") {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	if !a.Is4() {
		p.i--
		return netip.Prefix{}, p.errorf("net with a mask needs an IPv4 network (IPv6: a CIDR), got %q", tok.text)
	}
	p.next()
	if p.done() {
		return netip.Prefix{}, p.errorf("mask needs a value")
	}
	mt := p.next()
	m, err := netip.ParseAddr(mt.text)
	if err != nil || !m.Is4() {
		p.i--
		return netip.Prefix{}, p.errorf("mask needs an IPv4 netmask, got %q", mt.text)
	}
	bits, ok := maskBits(m.As4())
	if !ok {
		p.i--
		return netip.Prefix{}, p.errorf("mask %s is not contiguous (its one bits must come first, as in 255.255.0.0)", mt.text)
	}
	if pfx := netip.PrefixFrom(a, bits); pfx.Masked() != pfx {
		p.i -= 3
		return netip.Prefix{}, p.errorf("net %s mask %s has host bits set: the network is %s", a, mt.text, pfx.Masked().Addr())
	}
	return netip.PrefixFrom(a, bits), nil
}

// maskBits is a netmask's prefix length; false when its one bits do not
// all come before its zero bits.
func maskBits(m [4]byte) (int, bool) {
	v := uint32(m[0])<<24 | uint32(m[1])<<16 | uint32(m[2])<<8 | uint32(m[3])
	bits := 0
	for v&(1<<31) != 0 {
		v <<= 1
		bits++
	}
	return bits, v == 0
}
