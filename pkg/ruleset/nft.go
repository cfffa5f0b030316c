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
	rules map[nativeKey]*Rule // by table, chain and handle
}

type nativeKey struct {
	table, chain string
	handle       uint64
}

// ParseNative reads the IPv4 rules of `nft -a -s list ruleset`'s text: in
// each chain, every line that ends with its handle is a rule.
func ParseNative(text string) *Native {
	n := &Native{rules: map[nativeKey]*Rule{}}
	var table, chain string
	position := 0
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		f := strings.Fields(trimmed)
		switch {
		case len(f) >= 3 && f[0] == "table":
			table, chain = "", ""
			if f[1] == "ip" {
				table = unquote(f[2])
			}
		case len(f) >= 2 && f[0] == "chain" && table != "":
			chain, position = unquote(f[1]), 0
		case trimmed == "}" && strings.HasPrefix(line, "\t}"):
			chain = ""
		case chain != "":
			body, handle, ok := strings.Cut(trimmed, " # handle ")
			h, err := strconv.ParseUint(handle, 10, 64)
			if !ok || err != nil || strings.HasSuffix(body, ";") {
				continue // the chain's type, hook and policy
			}
			position++
			n.rules[nativeKey{table, chain, h}] = &Rule{Table: table, Chain: chain, Position: position, Text: body,
				Comment: nativeComment(body), Target: nativeTarget(body)}
		}
	}
	return n
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
