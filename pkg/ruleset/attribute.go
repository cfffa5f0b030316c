package ruleset

import (
	"math/bits"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Packet is what a hook saw of a packet: its tuple, devices and what is
// known of its mark.
type Packet struct {
	Src, Dst     netip.Addr
	Proto        uint8
	Sport, Dport uint16
	In, Out      string // devices; "" when not known
	Mark         Mark
	// CTState is conntrack's state of the packet, as --ctstate names it
	// ("INVALID"); "" when not known.
	CTState string
}

// Mark is what is known of a packet's mark: the bits of Known, valued as
// in Value. Rules set bits (kube-proxy's KUBE-MARK-MASQ, CNI's
// CNI-HOSTPORT-SETMARK) that later hooks match.
type Mark struct{ Value, Known uint32 }

func (m Mark) apply(op *markOp) Mark {
	return Mark{Value: (m.Value &^ op.mask) ^ op.value, Known: m.Known | op.mask}
}

// Attribution is the rule that decided what a hook did to a packet, and
// how evaluation got there.
type Attribution struct {
	Table, Hook string
	// Rule decided: the NAT or DROP rule, or the RETURN or ACCEPT that
	// ended the hook's chain before any did. nil when no rule did and the
	// chain's policy applied.
	Rule *Rule
	// Policy is the verdict of the chain's policy when a trace says it
	// applied (Rule nil) and the ruleset may not know the chain.
	Policy string
	// Handle is Rule's nftables handle, when a trace named it.
	Handle uint64
	// Via are the jumps that led to Rule, outermost first.
	Via []*Rule
	// Assumed are the rules whose matches the packet's tuple cannot
	// settle (a mark, conntrack state, address type, a random choice),
	// taken as matching or not because the outcome needs it.
	Assumed []Assumption
	// Skipped is, when the hook did not translate the packet, the NAT rule
	// it would have reached had Rule not ended the chain: what a RETURN
	// kept it from.
	Skipped *Rule
	// Mark is what is known of the packet's mark as the hook decided: the
	// packet carries it to the next hook.
	Mark Mark
	// returns are the RETURNs the packet took out of chains jumped to, in
	// order, on its way to Rule (or the policy).
	returns []returned
	// path is every assumption the walk made, decisive or not: another
	// walk along the same path takes them as given.
	path []Assumption
}

// returned is a RETURN a packet took out of a chain jumped to, and the
// jumps that led there, outermost first.
type returned struct {
	rule *Rule
	via  []*Rule
}

// Assumption is a rule taken as matching (or not) on the outcome's word.
type Assumption struct {
	Rule    *Rule
	Matched bool
}

// NAT attributes what the nat tables did at a hook (PREROUTING, INPUT,
// OUTPUT, POSTROUTING) to the first packet of a connection, seen as pre
// before the hook and post after it: the table that translated it (the
// iptables nat table, or a native one such as kube-proxy's), else the
// first that let it pass. nil when no table has such a chain, or no path
// through one yields what was seen.
func (rs *Ruleset) NAT(hook string, pre, post Packet) *Attribution {
	var first *Attribution
	for _, table := range rs.natTables(hook) {
		a := rs.natIn(table, hook, pre, post)
		switch {
		case a == nil:
		case a.Rule != nil && isNAT(a.Rule.Target):
			return a
		case first == nil:
			first = a
		}
	}
	return first
}

// natIn attributes what one nat table did (NAT). When the packet was not
// translated, the rule named is the one that kept it from a NAT rule, and
// Skipped that NAT rule: the RETURN or ACCEPT that ended the hook's chain,
// or, where the chain's policy decided, the last RETURN out of a chain
// jumped to that did (a masquerade chain of its own, as flannel's
// FLANNEL-POSTRTG, returns before its MASQUERADE and the hook's chain then
// runs out).
func (rs *Ruleset) natIn(table, hook string, pre, post Packet) *Attribution {
	a := rs.attribute(table, hook, pre, func(v verdict) bool { return v.yields(pre, post) })
	if a == nil || (a.Rule != nil && isNAT(a.Rule.Target)) {
		return a
	}
	candidates := []returned{{a.Rule, a.Via}}
	if a.Rule == nil {
		candidates = slices.Clone(a.returns)
		slices.Reverse(candidates)
	}
	for _, c := range candidates {
		// The same path up to the rule, which then does not match.
		given := slices.DeleteFunc(slices.Clone(a.path), func(as Assumption) bool { return as.Rule == c.rule })
		given = append(given, Assumption{Rule: c.rule})
		if s := rs.attribute(table, hook, pre, func(v verdict) bool { return isNAT(v.target()) }, given...); s != nil {
			a.Rule, a.Via, a.Skipped = c.rule, c.via, s.Rule
			break
		}
	}
	return a
}

// Other returns the translation the packet would have met had the
// decision a not been taken: the jump into the deciding rule's chain (or
// the rule itself) taken as not matching. For a DNAT to a dead address, it
// finds the rule that points elsewhere (a stale hostPort chain ahead of
// the live one). nil when no other NAT rule would have matched.
func (rs *Ruleset) Other(a *Attribution, pre Packet) *Attribution {
	if a == nil || a.Rule == nil || !isNAT(a.Rule.Target) {
		return nil
	}
	skip := a.Rule
	if len(a.Via) > 0 {
		skip = a.Via[len(a.Via)-1]
	}
	return rs.attribute(a.Table, a.Hook, pre, func(v verdict) bool {
		return v.kind == verdictNAT && v.rule.Target == a.Rule.Target && v.rule.ToDestination+v.rule.ToSource != a.Rule.ToDestination+a.Rule.ToSource
	}, Assumption{Rule: skip}, Assumption{Rule: a.Rule})
}

// Drop attributes a drop at a hook to the rule that dropped the packet:
// of the tables (and native tables' filter base chains, as kube-proxy's
// nftables mode rejects in) that can have dropped it, the one that needs
// the fewest assumptions, the first in the kernel's order at the hook
// among equals. nil when none can have.
func (rs *Ruleset) Drop(hook string, p Packet) *Attribution {
	var best *Attribution
	drops := func(v verdict) bool { return v.kind == verdictDrop }
	consider := func(a *Attribution) {
		if a != nil && (best == nil || len(a.Assumed) < len(best.Assumed)) {
			best = a
		}
	}
	for _, table := range []string{"raw", "mangle", "filter", "security"} {
		consider(rs.attribute(table, hook, p, drops))
	}
	var native []string
	for name, t := range rs.Tables {
		if len(t.Filters[hook]) > 0 {
			native = append(native, name)
		}
	}
	sort.Strings(native)
	for _, name := range native {
		for _, chain := range rs.Tables[name].Filters[hook] {
			consider(rs.attributeFrom(name, hook, rs.Tables[name].Chains[chain], p, drops))
		}
	}
	return best
}

// attribute finds the path through a table's chains from a hook that ends
// in a verdict want accepts; given are rules whose matching is decided
// beforehand.
func (rs *Ruleset) attribute(table, hook string, p Packet, want func(verdict) bool, given ...Assumption) *Attribution {
	t := rs.Tables[table]
	if t == nil {
		return nil
	}
	start := t.Chains[hook]
	if t.Hooks != nil {
		start = t.Chains[t.Hooks[hook]]
	}
	return rs.attributeFrom(table, hook, start, p, want, given...)
}

// attributeFrom is attribute from a given base chain of the table.
func (rs *Ruleset) attributeFrom(table, hook string, start *Chain, p Packet, want func(verdict) bool, given ...Assumption) *Attribution {
	t := rs.Tables[table]
	// iptables' rules never see an IPv6 packet, nor ip6tables' an IPv4 one.
	if t == nil || start == nil || p.Src.Is6() != rs.ipv6 || p.Dst.Is6() != rs.ipv6 {
		return nil
	}
	w := &walker{table: t, p: p, mark: p.Mark, want: want, given: given, budget: maxSteps}
	v, ok := w.run([]frame{{chain: start}})
	if !ok {
		return nil
	}
	a := &Attribution{Table: table, Hook: hook, Rule: v.rule, Via: v.via, Mark: w.mark, returns: w.returns, path: w.assumed}
	for _, as := range w.assumed {
		if !as.Matched || decisive(as.Rule, v) {
			a.Assumed = append(a.Assumed, as)
		}
	}
	return a
}

// decisive says whether a rule taken as matching shaped the verdict: it
// ended a chain, or led to the deciding rule. A jump to a chain that
// returned, or a MARK, would have changed nothing by not matching.
func decisive(r *Rule, v verdict) bool {
	switch r.Target {
	case "RETURN", "ACCEPT", "DROP", "REJECT":
		return true
	}
	if r == v.rule {
		return true
	}
	for _, j := range v.via {
		if j == r {
			return true
		}
	}
	return false
}

func isNAT(target string) bool {
	switch target {
	case "DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NETMAP":
		return true
	}
	return false
}

type verdictKind uint8

const (
	verdictAccept verdictKind = iota + 1 // ACCEPT, or a built-in chain's policy
	verdictDrop
	verdictNAT
)

type verdict struct {
	kind verdictKind
	rule *Rule   // nil for a built-in chain's policy reached at its end
	via  []*Rule // jumps to rule
}

func (v verdict) target() string {
	if v.rule == nil {
		return ""
	}
	return v.rule.Target
}

// yields says whether a verdict of the nat table turns pre into post.
func (v verdict) yields(pre, post Packet) bool {
	same := pre.Src == post.Src && pre.Dst == post.Dst && pre.Sport == post.Sport && pre.Dport == post.Dport
	switch v.kind {
	case verdictAccept:
		return same
	case verdictNAT:
	default:
		return false
	}
	r := v.rule
	switch r.Target {
	case "DNAT":
		return pre.Src == post.Src && pre.Sport == post.Sport && inRange(r.ToDestination, post.Dst, post.Dport, pre.Dport)
	case "SNAT":
		return pre.Dst == post.Dst && pre.Dport == post.Dport && inRange(r.ToSource, post.Src, post.Sport, pre.Sport)
	case "MASQUERADE":
		return pre.Dst == post.Dst && pre.Dport == post.Dport && pre.Src != post.Src
	case "REDIRECT":
		return pre.Src == post.Src && pre.Dst != post.Dst
	}
	return !same
}

// inRange says whether addr:port is what a DNAT or SNAT argument
// ("a[-b][:p[-q]]") chooses; without ports, port stays unchanged.
func inRange(arg string, addr netip.Addr, port, unchanged uint16) bool {
	addrs, ports, hasPorts := arg, "", false
	switch {
	case strings.HasPrefix(arg, "["):
		// ip6tables' "[a]:p" and "[a]-[b]:p-q".
		if i := strings.LastIndex(arg, "]:"); i >= 0 {
			addrs, ports, hasPorts = arg[:i+1], arg[i+2:], true
		}
		addrs = strings.NewReplacer("[", "", "]", "").Replace(addrs)
	case strings.Count(arg, ":") == 1:
		i := strings.IndexByte(arg, ':')
		addrs, ports, hasPorts = arg[:i], arg[i+1:], true
	}
	lo, hi, isRange := strings.Cut(addrs, "-")
	a, err := netip.ParseAddr(lo)
	if err != nil {
		return false
	}
	b := a
	if isRange {
		if b, err = netip.ParseAddr(hi); err != nil {
			return false
		}
	}
	if addr.Less(a) || b.Less(addr) {
		return false
	}
	if !hasPorts {
		return port == unchanged
	}
	plo, phi, isPortRange := strings.Cut(ports, "-")
	x, err1 := strconv.ParseUint(plo, 10, 16)
	y := x
	var err2 error
	if isPortRange {
		y, err2 = strconv.ParseUint(phi, 10, 16)
	}
	return err1 == nil && err2 == nil && uint64(port) >= x && uint64(port) <= y
}

// maxDepth bounds jumps between chains (iptables itself refuses loops);
// maxSteps bounds the rules one attribution evaluates, backtracking
// included.
const (
	maxDepth = 32
	maxSteps = 1 << 20
)

// walker evaluates a table's chains for one packet, depth first: where a
// rule's matches cannot be settled it tries the rule matching, then not,
// until a path yields what was observed.
type walker struct {
	table   *Table
	p       Packet
	want    func(verdict) bool
	given   []Assumption // decided beforehand (to find what a rule kept the packet from)
	assumed []Assumption
	mark    Mark       // as the path being tried left it
	returns []returned // the RETURNs out of jumped chains the path being tried took
	budget  int
}

// frame is a chain being evaluated: its next rule, and the jump that
// entered it.
type frame struct {
	chain *Chain
	next  int
	via   *Rule
}

type settled uint8

const (
	no settled = iota
	yes
	unsure
)

// run goes on from the top frame of stack; ok is false when no path from
// there yields what was observed. stack is never modified: backtracking
// returns to it.
func (w *walker) run(stack []frame) (verdict, bool) {
	if len(stack) > maxDepth {
		return verdict{}, false
	}
	top := stack[len(stack)-1]
	i, s := top.next, no
	// Rules that cannot match are passed in place: most of a chain like
	// KUBE-SERVICES, whose rules name one Service each.
	for ; i < len(top.chain.Rules); i++ {
		if w.budget--; w.budget < 0 {
			return verdict{}, false
		}
		if s = w.settle(top.chain.Rules[i]); s != no {
			break
		}
	}
	if i >= len(top.chain.Rules) {
		return w.leave(stack, nil)
	}
	r := top.chain.Rules[i]
	after := append(append([]frame(nil), stack[:len(stack)-1]...), frame{top.chain, i + 1, top.via})
	for _, matched := range w.branches(r, s) {
		if v, ok := w.branch(r, s, matched, after); ok {
			return v, true
		}
	}
	return verdict{}, false
}

// branches are the ways a rule settled as s is tried, in order: a settled
// rule as it settled; an unsure one matching first, unless all it is
// unsure of is the mark and a mark no rule set (the bits the kernel
// starts a packet with) would not match it: a packet carries a mark when
// something marked it. With flannel's FLANNEL-POSTRTG and nothing that
// marked the packet, its mark RETURN taken as matching would explain a
// missing SNAT as well as the stale RETURN further down.
func (w *walker) branches(r *Rule, s settled) []bool {
	switch {
	case s == yes:
		return matchedOnly
	case s == no:
		return unmatchedOnly
	case w.unmarkedMatches(r) == no:
		return unmatchedFirst
	}
	return matchedFirst
}

var (
	matchedOnly    = []bool{true}
	unmatchedOnly  = []bool{false}
	matchedFirst   = []bool{true, false}
	unmatchedFirst = []bool{false, true}
)

// unmarkedMatches settles a rule whose only unsure matches are of the
// mark as if the unknown bits were clear; unsure for any other rule.
func (w *walker) unmarkedMatches(r *Rule) settled {
	out := yes
	for _, m := range r.matches {
		if w.match(m) != unsure {
			continue
		}
		if m.kind != matchMark {
			return unsure
		}
		if (w.mark.Value&w.mark.Known&m.mask == m.value) == m.negate {
			out = no
		}
	}
	return out
}

// branch goes on past rule r, taken as matching or not; what the path
// assumed is undone when it yields nothing.
func (w *walker) branch(r *Rule, s settled, matched bool, after []frame) (verdict, bool) {
	assumed, mark, returns := len(w.assumed), w.mark, len(w.returns)
	if s == unsure {
		w.assumed = append(w.assumed, Assumption{Rule: r, Matched: matched})
		w.learn(r, matched)
	}
	var v verdict
	var ok bool
	if matched {
		v, ok = w.take(r, after)
	} else {
		v, ok = w.run(after)
	}
	if !ok {
		w.assumed, w.mark, w.returns = w.assumed[:assumed], mark, w.returns[:returns]
	}
	return v, ok
}

// learn keeps what taking rule r as matching (or not) says of the packet's
// mark, so that the path cannot take the contrary at a later rule:
// kube-proxy's KUBE-POSTROUTING returns a packet without its mark, and
// flannel's FLANNEL-POSTRTG, next, returns one with it. A rule taken as not
// matching says something only when its mark match is all it was unsure
// of, and fixes the bits only for a single-bit mask.
func (w *walker) learn(r *Rule, matched bool) {
	var marks []match
	doubts := 0
	for _, m := range r.matches {
		if w.match(m) != unsure {
			continue
		}
		doubts++
		if m.kind == matchMark {
			marks = append(marks, m)
		}
	}
	if !matched && doubts != 1 {
		return
	}
	for _, m := range marks {
		value := m.value
		if matched == m.negate { // the masked bits differ from m.value
			if bits.OnesCount32(m.mask) != 1 {
				continue
			}
			value ^= m.mask
		}
		w.mark = Mark{Value: w.mark.Value&^m.mask | value, Known: w.mark.Known | m.mask}
	}
}

// take applies a matching rule's target; after is the evaluation state
// past the rule.
func (w *walker) take(r *Rule, after []frame) (verdict, bool) {
	switch {
	case r.Target == "ACCEPT":
		return w.decide(verdict{kind: verdictAccept, rule: r}, after)
	case r.Target == "DROP" || r.Target == "REJECT":
		return w.decide(verdict{kind: verdictDrop, rule: r}, after)
	case isNAT(r.Target):
		return w.decide(verdict{kind: verdictNAT, rule: r}, after)
	case r.Target == "RETURN":
		if len(after) > 1 {
			w.returns = append(w.returns, returned{rule: r, via: jumps(after)})
		}
		return w.leave(after, r)
	case w.table.Chains[r.Target] != nil:
		callee := frame{chain: w.table.Chains[r.Target], via: r}
		if r.Goto {
			// The called chain returns to the caller's caller.
			return w.run(append(append([]frame(nil), after[:len(after)-1]...), callee))
		}
		return w.run(append(append([]frame(nil), after...), callee))
	}
	if r.setMark != nil {
		w.mark = w.mark.apply(r.setMark)
	}
	return w.run(after) // MARK, LOG, a counter: evaluation goes on
}

// leave returns from the top chain (by a RETURN rule, or its end): to its
// caller, or from a built-in chain to the chain's policy.
func (w *walker) leave(stack []frame, by *Rule) (verdict, bool) {
	if len(stack) > 1 {
		return w.run(stack[:len(stack)-1])
	}
	v := verdict{kind: verdictAccept, rule: by}
	if stack[0].chain.Policy == "DROP" {
		v.kind = verdictDrop
	}
	return w.decide(v, stack)
}

// decide ends evaluation with v, if it is what was observed.
func (w *walker) decide(v verdict, stack []frame) (verdict, bool) {
	if !w.want(v) {
		return verdict{}, false
	}
	v.via = jumps(stack)
	return v, true
}

// jumps are the rules that entered the stack's chains, outermost first.
func jumps(stack []frame) []*Rule {
	var via []*Rule
	for _, f := range stack {
		if f.via != nil {
			via = append(via, f.via)
		}
	}
	return via
}

// settle evaluates a rule's matches against the packet. A given rule is
// settled as given, and says of the mark what it said when assumed.
func (w *walker) settle(r *Rule) settled {
	for _, g := range w.given {
		if g.Rule != r {
			continue
		}
		w.learn(r, g.Matched)
		if g.Matched {
			return yes
		}
		return no
	}
	out := yes
	for _, m := range r.matches {
		switch w.match(m) {
		case no:
			return no
		case unsure:
			out = unsure
		}
	}
	return out
}

func (w *walker) match(m match) settled {
	var hit bool
	p := w.p
	switch m.kind {
	case matchSrc:
		hit = m.prefix.Contains(p.Src)
	case matchDst:
		hit = m.prefix.Contains(p.Dst)
	case matchProto:
		hit = m.proto == 0 || m.proto == p.Proto
	case matchIn, matchOut:
		dev := p.In
		if m.kind == matchOut {
			dev = p.Out
		}
		if dev == "" {
			return unsure
		}
		if prefix, wild := strings.CutSuffix(m.iface, "+"); wild {
			hit = strings.HasPrefix(dev, prefix)
		} else {
			hit = dev == m.iface
		}
	case matchMark:
		if m.mask&^w.mark.Known != 0 {
			return unsure // bits no rule on the path set, and the kernel did not say
		}
		hit = w.mark.Value&m.mask == m.value
	case matchCTState:
		if p.CTState == "" {
			return unsure
		}
		hit = slices.Contains(m.states, p.CTState)
	case matchSport, matchDport:
		port := p.Dport
		if m.kind == matchSport {
			port = p.Sport
		}
		for _, r := range m.ports {
			hit = hit || (port >= r.lo && port <= r.hi)
		}
	default:
		return unsure
	}
	if hit != m.negate {
		return yes
	}
	return no
}

// maxChoices bounds the endpoints DNATChoices lists: more than a finding
// names.
const maxChoices = 8

// DNATChoices are the DNAT rules the nat tables at hook choose among for
// a connection's first packet pre, each with its path: one per endpoint
// of a kube-proxy Service (its -m statistic jumps), in rule order. Each is
// found as the first DNAT a walk reaches once the ones before it are
// taken as not matching; at most maxChoices.
func (rs *Ruleset) DNATChoices(hook string, pre Packet) []*Attribution {
	dnat := func(v verdict) bool { return v.kind == verdictNAT && v.rule.Target == "DNAT" }
	var out []*Attribution
	for _, table := range rs.natTables(hook) {
		var chosen []Assumption
		for len(out) < maxChoices {
			a := rs.attribute(table, hook, pre, dnat, chosen...)
			if a == nil {
				break
			}
			out = append(out, a)
			chosen = append(chosen, Assumption{Rule: a.Rule})
		}
	}
	return out
}
