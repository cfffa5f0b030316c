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
	// hooks are its nat base chains by hook, filters its filter base
	// chains (in priority order); policies its base chains'.
	hooks    map[string]string
	filters  map[string][]prioritized
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
		t := &Table{Name: nt.name, Chains: map[string]*Chain{}, Hooks: nt.hooks, Filters: map[string][]string{}}
		for hook, chains := range nt.filters {
			sort.SliceStable(chains, func(i, j int) bool { return chains[i].priority < chains[j].priority })
			for _, c := range chains {
				t.Filters[hook] = append(t.Filters[hook], c.chain)
			}
		}
		for chain, policy := range nt.policies {
			t.Chains[chain] = &Chain{Name: chain, Policy: policy}
		}
		for _, nr := range nt.rules {
			c := t.Chains[nr.chain]
			if c == nil {
				c = &Chain{Name: nr.chain}
				t.Chains[nr.chain] = c
			}
			for _, tr := range translate(nr.body, nt.maps) {
				r, err := parseRule(nt.name, "-A "+quoteWord(nr.chain)+" "+tr.opts)
				if err != nil {
					r = &Rule{Table: nt.name, Chain: nr.chain, matches: []match{{kind: matchOpaque, text: nr.body}}}
				}
				r.Position, r.Text, r.Comment = nr.position, nr.body, nativeComment(nr.body)
				if tr.element != "" {
					// One element of a named map: the rule is named with it,
					// and a comment on it (kube-proxy names the Service there)
					// is the rule's.
					r.Text += ", element " + tr.element
					if c := nativeComment(tr.element); c != "" {
						r.Comment = c
					}
				}
				c.Rules = append(c.Rules, r)
			}
		}
		out[nt.name] = t
	}
	return out
}

// quoteWord quotes a word for tokens.
func quoteWord(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// translation is one iptables rule a native rule becomes: its options,
// and the element of a named verdict map it stands for.
type translation struct{ opts, element string }

// translate turns a native rule's body into the iptables options of the
// rules that match the same packets.
func translate(body string, maps map[string]string) []translation {
	comment := ""
	if c := nativeComment(body); c != "" {
		body = strings.TrimSpace(strings.Replace(body, `comment "`+c+`"`, "", 1))
		comment = " -m comment --comment " + quoteWord(c)
	}
	if key, elems, ok := strings.Cut(body, " vmap "); ok {
		return translateVmap(key, elems, maps, comment)
	}
	return []translation{{opts: translateStatements(strings.Fields(body)) + comment}}
}

// translateVmap expands a verdict map: kube-proxy's service maps (address,
// protocol, port: service-ips, no-endpoint-services) and its endpoint
// choice (numgen random mod N). An element's comment is its rule's.
func translateVmap(key, elems string, maps map[string]string, comment string) []translation {
	named := false
	if name, ok := strings.CutPrefix(elems, "@"); ok {
		elems, named = maps[name], true
	}
	elems = strings.Trim(strings.TrimSpace(elems), "{}")
	var out []translation
	var entries [][2]string
	for _, e := range strings.Split(elems, ",") {
		k, v, ok := strings.Cut(e, " : ")
		if ok {
			entries = append(entries, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	for i, e := range entries {
		verdict := translateStatements(strings.Fields(e[1]))
		elementComment := comment
		k := e[0]
		if c := nativeComment(k); c != "" {
			k = strings.TrimSpace(strings.Replace(k, `comment "`+c+`"`, "", 1))
			elementComment = " -m comment --comment " + quoteWord(c)
		}
		var opts string
		switch parts := strings.Split(k, " . "); {
		case key == "ip daddr . meta l4proto . th dport" && len(parts) == 3:
			opts = fmt.Sprintf("-d %s -p %s -m %s --dport %s %s%s", parts[0], parts[1], parts[1], parts[2], verdict, elementComment)
		case strings.HasPrefix(key, "numgen random mod "):
			opts = verdict + elementComment
			if left := len(entries) - i; left > 1 {
				opts = fmt.Sprintf("-m statistic --mode random --probability %.11f %s%s", 1/float64(left), verdict, elementComment)
			}
		default:
			opts = fmt.Sprintf("-m nft --expr %s %s%s", quoteWord(key+" "+k), verdict, elementComment)
		}
		t := translation{opts: opts}
		if named {
			t.element = e[0] + " : " + e[1]
		}
		out = append(out, t)
	}
	return out
}

// verdictWords begin the statements that end a native rule's matches.
var verdictWords = map[string]bool{"jump": true, "goto": true, "return": true, "accept": true, "drop": true, "reject": true,
	"dnat": true, "snat": true, "masquerade": true, "counter": true}

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
		case f[i] == "return" || f[i] == "accept" || f[i] == "drop" || f[i] == "reject":
			// reject's "with ..." says what it answers, not whether.
			b, i = append(b, "-j "+strings.ToUpper(f[i])), len(f)
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
			// A match not known here (ct state new, a set lookup) is one the
			// walk cannot settle; the statement after it still counts.
			end := i + 1
			for end < len(f) && !verdictWords[f[end]] {
				end++
			}
			unknown(f[i:end]...)
			i = end - 1
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
