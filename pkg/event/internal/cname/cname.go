// Package cname names C members of bpf/include/nettrace.h in Go: the
// generator of the record offsets (layoutgen) names them so, and the
// generator of the payload codecs (codecgen) finds them by these names.
package cname

import "strings"

// initialisms are the words Go names write in capitals.
var initialisms = map[string]bool{"cpu": true, "id": true, "mtu": true, "vni": true}

// Field is a member's name as an unexported Go field: dst_mtu, dstMTU.
func Field(member string) string {
	first, rest, _ := strings.Cut(member, "_")
	if rest == "" {
		return first
	}
	return first + Exported(rest)
}

// Exported is a member's name with its first word capitalized too: cpu,
// CPU; out_ifindex, OutIfindex.
func Exported(member string) string {
	var b strings.Builder
	for _, w := range strings.Split(member, "_") {
		switch {
		case initialisms[w]:
			b.WriteString(strings.ToUpper(w))
		case w != "":
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}
