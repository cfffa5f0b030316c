package ruleset

import (
	"strconv"
	"strings"
)

// Native is a namespace's native nftables rules (kube-proxy's nftables
// mode writes its own "table ip kube-proxy"), as `nft -a -s list ruleset`
// prints them: iptables-save shows only the tables of iptables-nft, and a
// traced rule of another table is named from here.
type Native struct {
	rules  map[nativeKey]*Rule // by table, chain and handle
	tables []*nativeTable
}

type nativeKey struct {
	table, chain string
	handle       uint64
}

// ParseNative reads the IPv4 tables of `nft -a -s list ruleset`'s text: in
// each chain, every line that ends with its handle is a rule; a base
// chain's first line says its type, hook and policy; a verdict map's
// elements are kept for the rules that look them up.
func ParseNative(text string) *Native {
	n := &Native{rules: map[nativeKey]*Rule{}}
	var t *nativeTable
	var chain, inMap string
	position := 0
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		f := strings.Fields(trimmed)
		switch {
		case len(f) >= 3 && f[0] == "table":
			t, chain, inMap = nil, "", ""
			if f[1] == "ip" {
				t = &nativeTable{name: unquote(f[2]), hooks: map[string]string{}, filters: map[string][]prioritized{},
					policies: map[string]string{}, maps: map[string]string{}}
				n.tables = append(n.tables, t)
			}
		case t == nil:
		case len(f) >= 2 && f[0] == "chain":
			chain, position, inMap = unquote(f[1]), 0, ""
		case len(f) >= 2 && f[0] == "map":
			chain, inMap = "", unquote(f[1])
		case trimmed == "}" && strings.HasPrefix(line, "\t}"):
			chain, inMap = "", ""
		case inMap != "":
			if _, elems, ok := strings.Cut(trimmed, "elements = "); ok {
				t.maps[inMap] = elems
			} else if strings.HasPrefix(t.maps[inMap], "{") && !strings.HasSuffix(t.maps[inMap], "}") {
				t.maps[inMap] += " " + trimmed
			}
		case chain != "" && len(f) >= 4 && f[0] == "type" && f[2] == "hook":
			hook := nftHooks[strings.TrimSuffix(f[3], ";")]
			switch f[1] {
			case "nat":
				t.hooks[hook] = chain
			case "filter":
				t.filters[hook] = append(t.filters[hook], prioritized{chain, chainPriority(trimmed)})
			}
			if _, policy, ok := strings.Cut(trimmed, "policy "); ok {
				t.policies[chain] = strings.ToUpper(strings.TrimSuffix(policy, ";"))
			}
		case chain != "":
			body, handle, ok := strings.Cut(trimmed, " # handle ")
			h, err := strconv.ParseUint(handle, 10, 64)
			if !ok || err != nil {
				continue
			}
			position++
			t.rules = append(t.rules, nativeRule{chain: chain, position: position, handle: h, body: body})
			n.rules[nativeKey{t.name, chain, h}] = &Rule{Table: t.name, Chain: chain, Position: position, Text: body,
				Comment: nativeComment(body), Target: nativeTarget(body)}
		}
	}
	return n
}

// prioritized is a base chain and its priority.
type prioritized struct {
	chain    string
	priority int
}

// chainPriorities are the names nft lists standard priorities by.
var chainPriorities = map[string]int{"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}

// chainPriority reads a base chain's "priority P;": a number, or a
// standard name with an offset ("dstnat - 10").
func chainPriority(line string) int {
	_, p, ok := strings.Cut(line, "priority ")
	if !ok {
		return 0
	}
	p, _, _ = strings.Cut(p, ";")
	f := strings.Fields(p)
	if len(f) == 0 {
		return 0
	}
	base, err := strconv.Atoi(f[0])
	if err != nil {
		base = chainPriorities[f[0]]
	}
	if len(f) == 3 {
		if off, err := strconv.Atoi(f[2]); err == nil {
			if f[1] == "-" {
				off = -off
			}
			base += off
		}
	}
	return base
}

// without leaves out the tables iptables-save showed.
func (n *Native) without(tables map[string]*Table) *Native {
	out := &Native{rules: map[nativeKey]*Rule{}}
	for _, t := range n.tables {
		if tables[t.name] == nil {
			out.tables = append(out.tables, t)
		}
	}
	for k, r := range n.rules {
		if tables[k.table] == nil {
			out.rules[k] = r
		}
	}
	return out
}

// Rule is the rule with handle in a table's chain; nil when there is none.
func (n *Native) Rule(table, chain string, handle uint64) *Rule {
	if n == nil {
		return nil
	}
	return n.rules[nativeKey{table, chain, handle}]
}

func unquote(s string) string { return strings.Trim(s, `"`) }

// nativeComment is a rule's comment "..." statement.
func nativeComment(body string) string {
	_, after, ok := strings.Cut(body, `comment "`)
	if !ok {
		return ""
	}
	c, _, _ := strings.Cut(after, `"`)
	return c
}

// nativeTarget names what a native rule does as iptables would call it
// (DNAT, MASQUERADE, DROP, ...): findings reason about targets.
func nativeTarget(body string) string {
	if c := nativeComment(body); c != "" {
		body = strings.Replace(body, `comment "`+c+`"`, "", 1)
	}
	targets := map[string]string{"dnat": "DNAT", "snat": "SNAT", "masquerade": "MASQUERADE", "redirect": "REDIRECT",
		"drop": "DROP", "reject": "REJECT", "return": "RETURN", "accept": "ACCEPT"}
	for _, w := range strings.Fields(body) {
		if t, ok := targets[w]; ok {
			return t
		}
	}
	return ""
}
