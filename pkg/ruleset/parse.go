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
			switch w {
			case "--to-destination":
				r.ToDestination = v
				i++
			case "--to-source":
				r.ToSource = v
				i++
			case "--set-xmark":
				value, mask, err := parseMark(v)
				if err != nil {
					return nil, fmt.Errorf("--set-xmark %s: %w", v, err)
				}
				r.setMark = &markOp{value: value, mask: mask}
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
		case w == "-s" || w == "--source" || w == "-d" || w == "--destination":
			p, err := parsePrefix(v)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", w, v, err)
			}
			m.kind, m.prefix = matchSrc, p
			if w == "-d" || w == "--destination" {
				m.kind = matchDst
			}
			i++
		case w == "-p" || w == "--protocol":
			proto, ok := protocols[v]
			if !ok {
				n, err := strconv.ParseUint(v, 10, 8)
				if err != nil {
					return nil, fmt.Errorf("protocol %q", v)
				}
				proto = uint8(n)
			}
			m.kind, m.proto = matchProto, proto
			i++
		case w == "-i" || w == "--in-interface" || w == "-o" || w == "--out-interface":
			m.kind, m.iface = matchIn, v
			if w == "-o" || w == "--out-interface" {
				m.kind = matchOut
			}
			i++
		case module == "mark" && w == "--mark":
			value, mask, err := parseMark(v)
			if err != nil {
				return nil, fmt.Errorf("--mark %s: %w", v, err)
			}
			m.kind, m.value, m.mask = matchMark, value, mask
			i++
		case (module == "conntrack" && w == "--ctstate") || (module == "state" && w == "--state"):
			m.kind, m.states = matchCTState, strings.Split(v, ",")
			i++
		case module == "comment" && w == "--comment":
			r.Comment = v
			i++
			continue
		case (module == "tcp" || module == "udp") && (w == "--dport" || w == "--destination-port" || w == "--sport" || w == "--source-port"),
			module == "multiport" && (w == "--dports" || w == "--destination-ports" || w == "--sports" || w == "--source-ports"):
			ports, err := parsePorts(v)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", w, v, err)
			}
			m.kind, m.ports = matchDport, ports
			if strings.Contains(w, "sport") || strings.Contains(w, "source") {
				m.kind = matchSport
			}
			i++
		case opaque >= 0:
			// An option of a module the tuple cannot settle: kept as text.
			o := &r.matches[opaque]
			if m.negate {
				o.text += " !"
			}
			o.text += " " + w
			if v != "" && !strings.HasPrefix(v, "-") && v != "!" {
				o.text += " " + v
				i++
			}
			continue
		default:
			// A core option or module option this package does not read
			// (--tcp-flags, -f, ...): it decides nothing it can check.
			m.kind, m.text = matchOpaque, w
			if v != "" && !strings.HasPrefix(v, "-") && v != "!" {
				m.text += " " + v
				i++
			}
			if m.negate {
				m.text = "! " + m.text
			}
		}
		r.matches = append(r.matches, m)
	}
	return r, nil
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
