package ruleset

import (
	"fmt"
	"sort"
	"strings"
)

// A native table is walked as iptables rules that match the same packets:
// each native rule is translated to iptables-save options and parsed as
// such (one rule per element of a verdict map; numgen's random choice
// becomes a statistic chain, which the walk settles by the outcome), and
// the rules keep the native rule's text and position. What a translation
// does not know becomes a match the walk cannot settle.

// nativeRule is a native rule as listed, before translation.
type nativeRule struct {
	chain    string
	position int
	handle   uint64
	body     string
}

// nativeTable is a native table as listed.
type nativeTable struct {
	name  string
	rules []nativeRule
	// hooks are its nat base chains by hook; policies its base chains'.
	hooks    map[string]string
	policies map[string]string
	maps     map[string]string // verdict maps' elements, as listed
}

var nftHooks = map[string]string{"prerouting": "PREROUTING", "input": "INPUT", "forward": "FORWARD", "output": "OUTPUT", "postrouting": "POSTROUTING"}

// walkable builds the iptables form of the native tables, to add to a
// ruleset's tables (their names never collide: iptables-nft's tables are
// left out of the native text).
func (n *Native) walkable() map[string]*Table {
	out := map[string]*Table{}
	for _, nt := range n.tables {
		t := &Table{Name: nt.name, Chains: map[string]*Chain{}, Hooks: nt.hooks}
		for chain, policy := range nt.policies {
			t.Chains[chain] = &Chain{Name: chain, Policy: policy}
		}
		for _, nr := range nt.rules {
			c := t.Chains[nr.chain]
			if c == nil {
				c = &Chain{Name: nr.chain}
				t.Chains[nr.chain] = c
			}
			for _, opts := range translate(nr.body, nt.maps) {
				r, err := parseRule(nt.name, "-A "+quoteWord(nr.chain)+" "+opts)
				if err != nil {
					r = &Rule{Table: nt.name, Chain: nr.chain, matches: []match{{kind: matchOpaque, text: nr.body}}}
				}
				r.Position, r.Text, r.Comment = nr.position, nr.body, nativeComment(nr.body)
				c.Rules = append(c.Rules, r)
			}
		}
		out[nt.name] = t
	}
	return out
}

// quoteWord quotes a word for tokens.
func quoteWord(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// translate turns a native rule's body into the iptables options of the
// rules that match the same packets.
func translate(body string, maps map[string]string) []string {
	comment := ""
	if c := nativeComment(body); c != "" {
		body = strings.TrimSpace(strings.Replace(body, `comment "`+c+`"`, "", 1))
		comment = " -m comment --comment " + quoteWord(c)
	}
	if key, elems, ok := strings.Cut(body, " vmap "); ok {
		return translateVmap(key, elems, maps, comment)
	}
	return []string{translateStatements(strings.Fields(body)) + comment}
}

// translateVmap expands a verdict map: kube-proxy's service map (address,
// protocol, port) and its endpoint choice (numgen random mod N).
func translateVmap(key, elems string, maps map[string]string, comment string) []string {
	if name, ok := strings.CutPrefix(elems, "@"); ok {
		elems = maps[name]
	}
	elems = strings.Trim(strings.TrimSpace(elems), "{}")
	var out []string
	var entries [][2]string
	for _, e := range strings.Split(elems, ",") {
		k, v, ok := strings.Cut(e, " : ")
		if ok {
			entries = append(entries, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	for i, e := range entries {
		verdict := translateStatements(strings.Fields(e[1]))
		switch parts := strings.Split(e[0], " . "); {
		case key == "ip daddr . meta l4proto . th dport" && len(parts) == 3:
			out = append(out, fmt.Sprintf("-d %s -p %s -m %s --dport %s %s%s", parts[0], parts[1], parts[1], parts[2], verdict, comment))
		case strings.HasPrefix(key, "numgen random mod "):
			if left := len(entries) - i; left > 1 {
				out = append(out, fmt.Sprintf("-m statistic --mode random --probability %.11f %s%s", 1/float64(left), verdict, comment))
			} else {
				out = append(out, verdict+comment)
			}
		default:
			out = append(out, fmt.Sprintf("-m nft --expr %s %s%s", quoteWord(key+" "+e[0]), verdict, comment))
		}
	}
	return out
}

// translateStatements translates a rule's matches and statement.
func translateStatements(f []string) string {
	var b []string
	unknown := func(words ...string) { b = append(b, "-m nft --expr "+quoteWord(strings.Join(words, " "))) }
	for i := 0; i < len(f); i++ {
		rest := len(f) - i
		switch {
		case rest >= 3 && f[i] == "ip" && (f[i+1] == "saddr" || f[i+1] == "daddr"):
			opt, v := "-s", f[i+2]
			if f[i+1] == "daddr" {
				opt = "-d"
			}
			if v == "!=" && rest >= 4 {
				b, i = append(b, "! "+opt+" "+f[i+3]), i+3
			} else {
				b, i = append(b, opt+" "+v), i+2
			}
		case rest >= 3 && f[i] == "meta" && f[i+1] == "l4proto", rest >= 3 && f[i] == "ip" && f[i+1] == "protocol":
			b, i = append(b, "-p "+f[i+2]), i+2
		case rest >= 3 && (f[i] == "tcp" || f[i] == "udp") && (f[i+1] == "dport" || f[i+1] == "sport"):
			b, i = append(b, fmt.Sprintf("-p %s -m %s --%s %s", f[i], f[i], f[i+1], f[i+2])), i+2
		case rest >= 6 && f[i] == "meta" && f[i+1] == "mark" && f[i+2] == "&" && (f[i+4] == "==" || f[i+4] == "!="):
			neg := ""
			if f[i+4] == "!=" {
				neg = "! "
			}
			b, i = append(b, fmt.Sprintf("-m mark %s--mark %s/%s", neg, f[i+5], f[i+3])), i+5
		case rest >= 7 && f[i] == "meta" && f[i+1] == "mark" && f[i+2] == "set" && f[i+3] == "meta" && f[i+4] == "mark" && f[i+5] == "|":
			b, i = append(b, fmt.Sprintf("-j MARK --set-xmark %s/%s", f[i+6], f[i+6])), i+6
		case rest >= 7 && f[i] == "meta" && f[i+1] == "mark" && f[i+2] == "set" && f[i+3] == "meta" && f[i+4] == "mark" && f[i+5] == "^":
			b, i = append(b, fmt.Sprintf("-j MARK --set-xmark %s/0x0", f[i+6])), i+6
		case rest >= 2 && (f[i] == "jump" || f[i] == "goto"):
			opt := "-j"
			if f[i] == "goto" {
				opt = "-g"
			}
			b, i = append(b, opt+" "+quoteWord(f[i+1])), i+1
		case f[i] == "return" || f[i] == "accept" || f[i] == "drop":
			b = append(b, "-j "+strings.ToUpper(f[i]))
		case rest >= 3 && (f[i] == "dnat" || f[i] == "snat") && f[i+1] == "to":
			opt := "DNAT --to-destination "
			if f[i] == "snat" {
				opt = "SNAT --to-source "
			}
			b, i = append(b, "-j "+opt+f[i+2]), len(f)
		case f[i] == "masquerade":
			b, i = append(b, "-j MASQUERADE"), len(f)
		case f[i] == "counter":
		default:
			unknown(f[i:]...)
			i = len(f)
		}
	}
	return strings.Join(b, " ")
}

// natTables are the tables whose chains translate at hook: iptables' nat
// table, then the native tables with a nat base chain there, by name.
func (rs *Ruleset) natTables(hook string) []string {
	out := []string{"nat"}
	var native []string
	for name, t := range rs.Tables {
		if t.Hooks[hook] != "" {
			native = append(native, name)
		}
	}
	sort.Strings(native)
	return append(out, native...)
}
