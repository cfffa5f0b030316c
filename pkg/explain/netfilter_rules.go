package explain

import (
	"fmt"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// NetfilterRule is a rule a finding names, and the part it played.
type NetfilterRule struct {
	Netns uint32
	Hook  string
	// OrHooks are the other hooks at which the same rule decides with as
	// few assumptions: a drop found from the ruleset, whose packet's path
	// does not say which of them it met (INPUT or FORWARD, when nothing
	// seen says whether the destination was local).
	OrHooks  []string
	Table    string
	Chain    string
	Position int    // 1-based in its chain; 0 when the chain's policy decided
	Handle   uint64 // its nftables handle, when traced
	Text     string
	// Comment is the rule's comment or, when it has none, the comment of
	// the nearest jump that led to it (CNI's "dnat name: ... id: ..." sits
	// on the jump into the container's chain).
	Comment string
	// Via are the jumps that led to the rule, outermost first, as
	// iptables-save prints them.
	Via []string
	// Verdict is the rule's target (DNAT, RETURN, DROP, ...), or the
	// chain's policy when no rule decided.
	Verdict string
	Role    string // RoleDecided, RoleSkipped or RoleOther
	// Source says how the rule was found: SourceTraced, reported by
	// nftables tracing; SourceRuleset, from the namespace's ruleset and
	// what the packet was seen to become.
	Source string
	// Assumed are the matches the packet's tuple could not settle (a mark,
	// conntrack state, a random choice), taken as the outcome needs them.
	Assumed []string
	// At is the kernel time of the event whose outcome the rule is named
	// for: the step a timeline shows it on.
	At uint64
	// Service is the Kubernetes Service a DNAT rule of kube-proxy's that
	// decided translates for; nil for any other rule.
	Service *service.Service
}

// Roles of a named rule.
const (
	RoleDecided = "decided" // made the hook do what it did
	RoleSkipped = "skipped" // the NAT rule the decided rule kept the packet from
	RoleOther   = "other"   // another rule for the same destination, and where it leads
)

var roleWords = map[string]string{
	RoleDecided: "decided",
	RoleSkipped: "would have translated it, had the rule above not ended the chain",
	RoleOther:   "matches the same packets and chooses elsewhere",
}

// Sources of a named rule.
const (
	SourceTraced  = "traced"  // the kernel traced the packet through it
	SourceRuleset = "ruleset" // attributed from the ruleset and the outcome
)

// tracedSteps are the kernel's trace of the packet of e at hook, seen
// there with tuple t; nil when it was not traced there.
func tracedSteps(n Context, e *event.Event, hook event.Hook, t event.Tuple) []ruleset.Trace {
	at := *e
	at.Hook = hook
	return n.RuleTrace(e.Netns, hook.String(), ruleset.HookPacket(&at, t), e.Time)
}

// confirmNAT settles an attribution from the ruleset with the packet's
// traced steps at hook: the walk's when the trace went through its rule
// (the walk also knows the NAT rule skipped and the rules that would
// choose elsewhere), with nothing left assumed; the trace's own otherwise.
// The source says which.
func confirmNAT(rs *ruleset.Ruleset, walked *ruleset.Attribution, hook string, steps []ruleset.Trace) (*ruleset.Attribution, string) {
	if walked != nil && walked.TracedIn(steps) {
		confirmed := *walked
		confirmed.Assumed = nil
		for _, s := range steps {
			if walked.Rule != nil && s.Kind == ruleset.TraceRule && s.Table == walked.Table && s.Chain == walked.Rule.Chain && s.Position == walked.Rule.Position {
				confirmed.Handle = s.Handle
			}
		}
		return &confirmed, SourceTraced
	}
	tr := rs.TracedNAT(hook, steps)
	if tr == nil {
		return walked, SourceRuleset
	}
	if walked != nil {
		tr.Mark = walked.Mark
	}
	return tr, SourceTraced
}

// rulesetAt is the ruleset of the event's namespace when it happened, in
// the family of its packet.
func rulesetAt(n Context, e *event.Event) *ruleset.Ruleset {
	return n.Ruleset(e.Netns, e.Time).Of(e)
}

// PacketNATRules names, for each nat event of packet p that crossed the
// nat table (a connection's first packet), the rule that decided what the
// hook did and the NAT rule it kept the packet from; indexed like
// p.Events, nil where nothing is named (no ruleset, or not a first
// packet). One walk per event: the marks a hook sets are carried to the
// next in the same namespace.
func PacketNATRules(n Context, p *flow.Packet) [][]NetfilterRule {
	var out [][]NetfilterRule
	marks := map[uint32]ruleset.Mark{}
	for i := range p.Events {
		e := &p.Events[i]
		if e.Point != event.PointNAT {
			continue
		}
		rules, mark := natRulesWith(n, e, marks[e.Netns], false)
		marks[e.Netns] = mark
		if rules != nil {
			if out == nil {
				out = make([][]NetfilterRule, len(p.Events))
			}
			out[i] = rules
		}
	}
	return out
}

// natRules names the rules behind a nat event of packet p, as
// PacketNATRules does, and for a DNAT another rule that would have chosen
// elsewhere.
func natRules(n Context, p *flow.Packet, e *event.Event) []NetfilterRule {
	rules, _ := natRulesWith(n, e, markBefore(rulesetAt(n, e), p, e), true)
	return rules
}

// natRulesWith attributes a nat event whose packet's mark is known as mark,
// and returns the mark as the hook left it.
func natRulesWith(n Context, e *event.Event, mark ruleset.Mark, other bool) ([]NetfilterRule, ruleset.Mark) {
	rs := rulesetAt(n, e)
	if !ruleset.CrossesNAT(e) {
		return nil, mark
	}
	a, source := confirmNAT(rs, rs.NATOf(e, mark), e.Hook.String(), ruleset.FirstPass(tracedSteps(n, e, e.Hook, e.NAT.Pre)))
	if a == nil {
		return nil, mark
	}
	out := []NetfilterRule{named(rs, e, a, a.Rule, RoleDecided, source)}
	if a.Skipped != nil {
		out = append(out, named(rs, e, a, a.Skipped, RoleSkipped, SourceRuleset))
	}
	if other && a.Rule != nil && a.Rule.Target == "DNAT" {
		pre := ruleset.HookPacket(e, e.NAT.Pre)
		pre.Mark = mark
		if o := rs.Other(a, pre); o != nil {
			out = append(out, named(rs, e, o, o.Rule, RoleOther, SourceRuleset))
		}
	}
	return out, a.Mark
}

// markBefore is what the nat hooks a packet crossed before e in e's
// namespace set of its mark (KUBE-MARK-MASQ at PREROUTING or OUTPUT, for
// KUBE-POSTROUTING to match).
func markBefore(rs *ruleset.Ruleset, p *flow.Packet, e *event.Event) ruleset.Mark {
	var mark ruleset.Mark
	for i := range p.Events {
		b := &p.Events[i]
		if b == e || b.Time > e.Time {
			break
		}
		if b.Point == event.PointNAT && b.Netns == e.Netns && b.Hook != e.Hook {
			if a := rs.NATOf(b, mark); a != nil {
				mark = a.Mark
			}
		}
	}
	return mark
}

// dropRules names the rule that dropped a packet: the one the kernel
// traced it to, else, of the hooks it can have been dropped in, the
// attribution from the ruleset that needs the fewest assumptions, the
// first hook among equals. ctState is conntrack's state of the packet when
// known ("INVALID"), which settles --ctstate matches.
func dropRules(n Context, e *event.Event, ctState string, hooks ...event.Hook) []NetfilterRule {
	rs := rulesetAt(n, e)
	for _, hook := range hooks {
		if a := rs.TracedDrop(hook.String(), tracedSteps(n, e, hook, e.Current())); a != nil {
			return []NetfilterRule{named(rs, e, a, a.Rule, RoleDecided, SourceTraced)}
		}
	}
	if rs == nil {
		return nil
	}
	var best *ruleset.Attribution
	var tied []*ruleset.Attribution
	for _, hook := range hooks {
		at := *e
		at.Hook = hook
		p := ruleset.HookPacket(&at, e.Current())
		p.CTState = ctState
		a := rs.Drop(hook.String(), p)
		if a != nil && (best == nil || len(a.Assumed) < len(best.Assumed)) {
			best = a
		}
		if a != nil {
			tied = append(tied, a)
		}
	}
	if best == nil {
		return nil
	}
	decided := named(rs, e, best, best.Rule, RoleDecided, SourceRuleset)
	for _, a := range tied {
		if a.Hook != best.Hook && a.Rule == best.Rule && len(a.Assumed) == len(best.Assumed) {
			decided.OrHooks = append(decided.OrHooks, a.Hook)
		}
	}
	return []NetfilterRule{decided}
}

func named(rs *ruleset.Ruleset, e *event.Event, a *ruleset.Attribution, r *ruleset.Rule, role, source string) NetfilterRule {
	nr := NetfilterRule{Netns: e.Netns, Hook: a.Hook, Table: a.Table, Chain: a.Hook, Role: role, Source: source, At: e.Time}
	if r == nil {
		nr.Verdict = a.Policy
		if nr.Verdict == "" && rs != nil && rs.Tables[a.Table] != nil && rs.Tables[a.Table].Chains[a.Hook] != nil {
			nr.Verdict = rs.Tables[a.Table].Chains[a.Hook].Policy
		}
		return nr
	}
	nr.Chain, nr.Position, nr.Text, nr.Comment, nr.Verdict = r.Chain, r.Position, r.Text, r.Comment, r.Target
	for i := len(a.Via) - 1; i >= 0 && nr.Comment == ""; i-- {
		nr.Comment = a.Via[i].Comment
	}
	for _, j := range a.Via {
		nr.Via = append(nr.Via, j.Text)
	}
	if role == RoleDecided {
		nr.Service = serviceOfNAT(r, a.Via)
		if nr.Service == nil {
			nr.Service = serviceOfDrop(r, a.Via)
		}
		nr.Handle = a.Handle
		for _, as := range a.Assumed {
			how := "matched"
			if !as.Matched {
				how = "did not match"
			}
			nr.Assumed = append(nr.Assumed, fmt.Sprintf("%s rule %d %s", as.Rule.Chain, as.Rule.Position, how))
		}
	}
	return nr
}

// String names the rule in a finding's text: where it is, what it does,
// its comment.
func (r NetfilterRule) String() string {
	if r.Position == 0 {
		return fmt.Sprintf("the %s policy of %s %s", r.Verdict, r.Table, r.Chain)
	}
	s := fmt.Sprintf("%s %s rule %d (%s", r.Table, r.Chain, r.Position, r.Verdict)
	if r.Comment != "" {
		s += fmt.Sprintf(", %q", r.Comment)
	}
	return s + ")"
}

// Step says what the rule did, for the timeline step it is named on.
func (r NetfilterRule) Step() string {
	switch r.Role {
	case RoleSkipped:
		return "not reached: " + r.String()
	case RoleOther:
		return "also matching: " + r.String() + " -> " + r.target()
	}
	if r.Source == SourceTraced {
		return "rule: " + r.String() + ", traced"
	}
	return "rule: " + r.String()
}

// ruleClause says in a few words which rule decided and what it kept the
// packet from, for a finding's summary; "" when no rule is named.
func ruleClause(rules []NetfilterRule) string {
	var decided, skipped, other *NetfilterRule
	for i := range rules {
		switch rules[i].Role {
		case RoleDecided:
			decided = &rules[i]
		case RoleSkipped:
			skipped = &rules[i]
		case RoleOther:
			other = &rules[i]
		}
	}
	if decided == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(decided.String())
	if from := decided.enteredFrom(); from != "" {
		fmt.Fprintf(&b, ", entered from %s,", from)
	}
	if skipped != nil {
		fmt.Fprintf(&b, " ended the chain before %s", skipped.String())
	} else {
		b.WriteString(" decided")
	}
	if other != nil {
		fmt.Fprintf(&b, "; %s would have chosen %s", other.String(), other.target())
	}
	return b.String()
}

// enteredFrom is the hook's chain whose jump led to a RETURN or ACCEPT
// that kept a packet from a NAT rule (flannel's FLANNEL-POSTRTG, jumped to
// from POSTROUTING), "" for a rule of the hook's chain itself, or any
// other: the user deletes the rule in the chain named, which the hook
// itself does not show.
func (r NetfilterRule) enteredFrom() string {
	if len(r.Via) == 0 || (r.Verdict != "RETURN" && r.Verdict != "ACCEPT") {
		return ""
	}
	if f := strings.Fields(r.Via[0]); len(f) > 1 && f[0] == "-A" {
		return f[1]
	}
	return ""
}

// target is a NAT rule's --to argument (iptables) or its "dnat to"
// address (nftables), from its text.
func (r NetfilterRule) target() string {
	for _, opt := range []string{"--to-destination ", "--to-source ", "dnat to ", "snat to "} {
		if _, after, ok := strings.Cut(r.Text, opt); ok {
			to, _, _ := strings.Cut(after, " ")
			return to
		}
	}
	return r.Verdict
}

// ruleFacts are evidence lines for the named rules: the rule as
// iptables-save prints it.
func ruleFacts(n Context, e *event.Event, rules []NetfilterRule) []Evidence {
	var out []Evidence
	for _, r := range rules {
		if r.Position == 0 {
			continue
		}
		fact := fmt.Sprintf("%s %s %s rule %d %s: %s", n.NetnsName(r.Netns), r.Table, r.Chain, r.Position, roleWords[r.Role], r.Text)
		if r.enteredFrom() != "" {
			fact += ", reached by " + strings.Join(r.Via, ", then ")
		}
		switch {
		case r.Source == SourceTraced:
			fact += fmt.Sprintf(" (traced by the kernel: nftables handle %d)", r.Handle)
		case len(r.Assumed) > 0:
			fact += " (assuming " + strings.Join(r.Assumed, ", ") + ", as the outcome shows)"
		}
		out = append(out, evidence(n, e, "%s", fact))
	}
	return out
}
