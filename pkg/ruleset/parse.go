package ruleset

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

type matchKind uint8

const (
	matchSrc matchKind = iota + 1
	matchDst
	matchProto
	matchIn
	matchOut
	matchSport
	matchDport
	matchMark
	matchCTState
	// matchOpaque is a match the packet's tuple cannot settle: a mark,
	// conntrack state, address type, a random choice.
	matchOpaque
)

// match is one condition of a rule.
type match struct {
	kind   matchKind
	negate bool
	prefix netip.Prefix
	proto  uint8
	iface  string
	ports  []portRange
	value  uint32 // mark: (packet mark & mask) == value
	mask   uint32
	states []string // conntrack states, any of which matches
	text   string   // as written, for an opaque match
}

type portRange struct{ lo, hi uint16 }

// tokens splits an iptables-save line into words; iptables-save quotes a
// word with spaces in double quotes, escaping quotes inside with \.
func tokens(line string) ([]string, error) {
	var out []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if inWord {
		out = append(out, w.String())
	}
	return out, nil
}

var protocols = map[string]uint8{"all": 0, "icmp": 1, "tcp": 6, "udp": 17, "sctp": 132}

// targetOption reads one option of the rule's target (w, with the word
// after it v) and says whether it took v as its value.
func (r *Rule) targetOption(w, v string) (bool, error) {
	switch w {
	case "--to-destination":
		r.ToDestination = v
	case "--to-source":
		r.ToSource = v
	case "--set-xmark":
		value, mask, err := parseMark(v)
		if err != nil {
			return false, fmt.Errorf("--set-xmark %s: %w", v, err)
		}
		r.setMark = &markOp{value: value, mask: mask}
	default:
		return false, nil
	}
	return true, nil
}

func parseRule(table, line string) (*Rule, error) {
	words, err := tokens(line)
	if err != nil {
		return nil, err
	}
	if len(words) < 2 {
		return nil, fmt.Errorf("rule %q names no chain", line)
	}
	r := &Rule{Table: table, Chain: words[1], Text: line}
	module := "" // the -m whose options follow
	inTarget := false
	negate := false
	opaque := -1 // index in r.matches of the opaque match collecting words
	for i := 2; i < len(words); i++ {
		w := words[i]
		if w == "!" {
			negate = true
			continue
		}
		m := match{negate: negate}
		negate = false
		v := "" // the word after: the option's value, if it takes one
		if i+1 < len(words) {
			v = words[i+1]
		}
		switch {
		case w == "-j" || w == "-g":
			r.Target, r.Goto, inTarget, module, opaque = v, w == "-g", true, "", -1
			i++
			continue
		case inTarget:
			took, err := r.targetOption(w, v)
			if err != nil {
				return nil, err
			}
			if took {
				i++
			}
			continue
		case w == "-m":
			module, opaque = v, -1
			i++
			switch v {
			case "comment", "tcp", "udp", "multiport", "mark", "conntrack", "state":
			default:
				m.kind, m.text = matchOpaque, "-m "+v
				r.matches = append(r.matches, m)
				opaque = len(r.matches) - 1
			}
			continue
		case module == "comment" && w == "--comment":
			r.Comment = v
			i++
			continue
		}
		took, err := parseMatch(module, w, v, &m)
		if err != nil {
			return nil, err
		}
		if !took {
			took = r.unread(opaque, m, w, v)
		} else {
			r.matches = append(r.matches, m)
		}
		if took {
			i++
		}
	}
	return r, nil
}

// unread keeps an option this package does not read as text: with its
// module's opaque match (r.matches[opaque]) when it has one, else as an
// opaque match of its own (a core option such as --tcp-flags or -f): it
// decides nothing the tuple can settle. It says whether it took v, the
// word after it, as its value.
func (r *Rule) unread(opaque int, m match, w, v string) bool {
	took := v != "" && !strings.HasPrefix(v, "-") && v != "!"
	if opaque >= 0 {
		o := &r.matches[opaque]
		if m.negate {
			o.text += " !"
		}
		o.text += " " + w
		if took {
			o.text += " " + v
		}
		return took
	}
	m.kind, m.text = matchOpaque, w
	if took {
		m.text += " " + v
	}
	if m.negate {
		m.text = "! " + m.text
	}
	r.matches = append(r.matches, m)
	return took
}

// parseMatch reads a match option (w, with the word after it v) that the
// tuple or what nettrace sees can settle: a core option (-s, -d, -p, -i,
// -o) or an option of module's. It says whether it took the option.
func parseMatch(module, w, v string, m *match) (bool, error) {
	switch {
	case w == "-s" || w == "--source" || w == "-d" || w == "--destination":
		p, err := parsePrefix(v)
		if err != nil {
			return false, fmt.Errorf("%s %s: %w", w, v, err)
		}
		m.kind, m.prefix = matchSrc, p
		if w == "-d" || w == "--destination" {
			m.kind = matchDst
		}
	case w == "-p" || w == "--protocol":
		proto, ok := protocols[v]
		if !ok {
			n, err := strconv.ParseUint(v, 10, 8)
			if err != nil {
				return false, fmt.Errorf("protocol %q", v)
			}
			proto = uint8(n)
		}
		m.kind, m.proto = matchProto, proto
	case w == "-i" || w == "--in-interface" || w == "-o" || w == "--out-interface":
		m.kind, m.iface = matchIn, v
		if w == "-o" || w == "--out-interface" {
			m.kind = matchOut
		}
	case module == "mark" && w == "--mark":
		value, mask, err := parseMark(v)
		if err != nil {
			return false, fmt.Errorf("--mark %s: %w", v, err)
		}
		m.kind, m.value, m.mask = matchMark, value, mask
	case (module == "conntrack" && w == "--ctstate") || (module == "state" && w == "--state"):
		m.kind, m.states = matchCTState, strings.Split(v, ",")
	case (module == "tcp" || module == "udp") && (w == "--dport" || w == "--destination-port" || w == "--sport" || w == "--source-port"),
		module == "multiport" && (w == "--dports" || w == "--destination-ports" || w == "--sports" || w == "--source-ports"):
		ports, err := parsePorts(v)
		if err != nil {
			return false, fmt.Errorf("%s %s: %w", w, v, err)
		}
		m.kind, m.ports = matchDport, ports
		if strings.Contains(w, "sport") || strings.Contains(w, "source") {
			m.kind = matchSport
		}
	default:
		return false, nil
	}
	return true, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	addr, mask, _ := strings.Cut(s, "/")
	if m, err := netip.ParseAddr(mask); err == nil {
		// A dotted mask: iptables-save prints one for a non-contiguous mask
		// only, which no CIDR holds.
		b := m.AsSlice()
		ones := 0
		for _, x := range b {
			for x&0x80 != 0 {
				ones++
				x <<= 1
			}
		}
		s = addr + "/" + strconv.Itoa(ones)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}

// parseMark reads "value[/mask]" (the mask defaults to every bit).
func parseMark(s string) (value, mask uint32, err error) {
	v, m, hasMask := strings.Cut(s, "/")
	x, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return 0, 0, err
	}
	y := uint64(0xffffffff)
	if hasMask {
		if y, err = strconv.ParseUint(m, 0, 32); err != nil {
			return 0, 0, err
		}
	}
	return uint32(x), uint32(y), nil
}

func parsePorts(s string) ([]portRange, error) {
	var out []portRange
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, ":")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 16); err != nil {
				return nil, err
			}
		}
		out = append(out, portRange{uint16(a), uint16(b)})
	}
	return out, nil
}
