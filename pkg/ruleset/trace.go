package ruleset

import (
	"slices"
	"strings"
	"sync"
)

// Trace is one step nftables tracing (NFT_MSG_TRACE) reported of a packet
// in a namespace: a rule it matched, the end of a chain it returned from,
// or a base chain's policy. iptables-nft rules are nftables rules, so a
// traced rule is the iptables rule at Position of Table's Chain.
type Trace struct {
	Netns uint32
	// Time is when the report was read (CLOCK_MONOTONIC nanoseconds, the
	// events' clock): a few microseconds after the packet passed.
	Time uint64
	// ID is the kernel's trace id: the same for every step of one packet
	// through one namespace.
	ID   uint32
	Hook string // PREROUTING ... POSTROUTING, of the base chain it entered by
	// Packet is the packet as the rule saw it (before the hook's NAT, which
	// is applied when the chain is done).
	Packet   Packet
	Kind     TraceKind
	Table    string
	Chain    string
	Handle   uint64 // the rule's nftables handle; 0 for a policy or a chain's end
	Position int    // 1-based in its chain; 0 when not a rule or not found
	// Verdict is the rule's nftables verdict: accept, drop, continue,
	// return, "jump CHAIN", "goto CHAIN".
	Verdict string
}

// TraceKind is what a trace step reports (enum nft_trace_types).
type TraceKind uint8

// Trace kinds.
const (
	TracePolicy TraceKind = 1 // the base chain ended, its policy applied
	TraceReturn TraceKind = 2 // a chain ended without a verdict
	TraceRule   TraceKind = 3 // a rule matched
)

// terminal says whether the step ended the packet's way through its hook.
func (t *Trace) terminal() bool {
	switch t.Verdict {
	case "accept", "drop", "queue", "stolen":
		return true
	}
	return false
}

// jumpTarget is the chain a jump or goto step entered, or "".
func (t *Trace) jumpTarget() string {
	for _, prefix := range []string{"jump ", "goto "} {
		if to, ok := strings.CutPrefix(t.Verdict, prefix); ok {
			return to
		}
	}
	return ""
}

// traceKey is the packet a trace is looked up by: where it was seen and its
// tuple there.
type traceKey struct {
	netns        uint32
	hook         string
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
}

func keyOf(netns uint32, hook string, p Packet) traceKey {
	return traceKey{netns: netns, hook: hook, src: p.Src.As16(), dst: p.Dst.As16(), sport: p.Sport, dport: p.Dport, proto: p.Proto}
}

// Traces holds the trace steps of a run, looked up by packet. It keeps
// the most recent ones (at least maxTraces/2 steps): a flow is explained
// seconds after its packets passed. Safe for concurrent use.
type Traces struct {
	mu sync.RWMutex
	// Two generations: when cur fills, it becomes old and old is dropped,
	// which bounds memory without tracking each step's age.
	cur, old map[traceKey][]Trace
	n        int
}

// maxTraces bounds the steps Traces keeps.
const maxTraces = 1 << 18

// Add keeps a trace step.
func (ts *Traces) Add(t Trace) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.cur == nil || ts.n >= maxTraces/2 {
		ts.old, ts.cur, ts.n = ts.cur, map[traceKey][]Trace{}, 0
	}
	k := keyOf(t.Netns, t.Hook, t.Packet)
	ts.cur[k] = append(ts.cur[k], t)
	ts.n++
}

// TraceWindow is how long after an event a trace step of its packet may
// be read: the reader runs behind the kernel by at most this much.
const TraceWindow = 5_000_000_000

// traceSlack is how long before an event a trace step of its packet may
// have been read: the clocks are the same, but the event's time is taken
// at the hook while the trace is stamped when read, so only a step read
// before the event's hook ran by this much belongs to an earlier packet.
const traceSlack = 1_000_000

// Pass returns the steps of the packets with tuple p seen at hook in netns
// at kernel time at: of the traced packets with that tuple there, those
// read after it (within TraceWindow), each one's steps in order, the first
// read first. Several packets of one connection can pass within a
// reader's lag, and only what they did tells them apart (FirstPass,
// TracedDrop). nil when no trace of it was kept.
func (ts *Traces) Pass(netns uint32, hook string, p Packet, at uint64) []Trace {
	if ts == nil {
		return nil
	}
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	k := keyOf(netns, hook, p)
	steps := append(ts.old[k][:len(ts.old[k]):len(ts.old[k])], ts.cur[k]...)
	var ids []uint32
	for _, s := range steps {
		if s.Time+traceSlack >= at && s.Time <= at+TraceWindow && !slices.Contains(ids, s.ID) {
			ids = append(ids, s.ID)
		}
	}
	var out []Trace
	for _, id := range ids {
		for _, s := range steps {
			if s.ID == id && s.Time+traceSlack >= at {
				out = append(out, s)
			}
		}
	}
	return out
}

// passes splits Pass's steps into each packet's.
func passes(steps []Trace) [][]Trace {
	var out [][]Trace
	for i := 0; i < len(steps); {
		j := i + 1
		for j < len(steps) && steps[j].ID == steps[i].ID {
			j++
		}
		out = append(out, steps[i:j])
		i = j
	}
	return out
}

// FirstPass is the steps of the first packet Pass found: the one a
// connection's first packet left, where NAT rules run.
func FirstPass(steps []Trace) []Trace {
	if ps := passes(steps); len(ps) > 0 {
		return ps[0]
	}
	return nil
}

// Traced attributes what table did at hook to a packet from its traced
// steps there: the rule whose verdict ended the hook's evaluation (a NAT
// rule's accept, a drop), else the last RETURN rule that kept the packet
// from a NAT rule later in its chain (after an earlier one the packet still
// went on to other NAT rules), else the first RETURN, else the base chain's
// policy. Via are the traced jumps that led to it.
// nil when the steps have none in table.
func (rs *Ruleset) Traced(table, hook string, steps []Trace) *Attribution {
	var decided *Trace
	var via, decidedVia []*Trace
steps:
	for i := range steps {
		s := &steps[i]
		if s.Table != table || s.Hook != hook {
			continue
		}
		for len(via) > 0 && via[len(via)-1].jumpTarget() != s.Chain {
			via = via[:len(via)-1]
		}
		switch {
		case s.Kind == TraceRule && s.jumpTarget() != "":
			via = append(via, s)
		case s.Kind == TraceRule && s.terminal(), s.Kind == TracePolicy && s.Verdict == "drop":
			decided, decidedVia = s, via
			break steps
		case s.Kind == TraceRule && s.Verdict == "return" && (decided == nil || decided.Kind != TraceRule || rs.skipsNAT(s)),
			s.Kind == TracePolicy && decided == nil:
			decided, decidedVia = s, append([]*Trace(nil), via...)
		}
	}
	if decided == nil {
		return nil
	}
	a := &Attribution{Table: table, Hook: hook, Handle: decided.Handle}
	if decided.Kind == TraceRule {
		a.Rule = rs.tracedRule(decided)
	} else {
		a.Policy = strings.ToUpper(decided.Verdict)
	}
	for _, j := range decidedVia {
		a.Via = append(a.Via, rs.tracedRule(j))
	}
	return a
}

// TracedNAT attributes what the nat tables (iptables' nat, kube-proxy's
// own) did at hook from a packet's steps there: the table whose rule
// translated it, else iptables' nat table, else the first table traced.
func (rs *Ruleset) TracedNAT(hook string, steps []Trace) *Attribution {
	var first, nat *Attribution
	for _, table := range tracedTables(hook, steps) {
		a := rs.Traced(table, hook, steps)
		switch {
		case a == nil:
			continue
		case a.Rule != nil && isNAT(a.Rule.Target):
			return a
		case table == "nat":
			nat = a
		case first == nil:
			first = a
		}
	}
	if nat != nil {
		return nat
	}
	return first
}

// TracedDrop attributes the drop of a packet at hook from the steps of
// the first packet of Pass's that was dropped there: the rule or policy of
// any table that dropped it; nil when none was.
func (rs *Ruleset) TracedDrop(hook string, steps []Trace) *Attribution {
	for _, pass := range passes(steps) {
		for _, table := range tracedTables(hook, pass) {
			if a := rs.Traced(table, hook, pass); a != nil && a.Drops() {
				return a
			}
		}
	}
	return nil
}

// tracedTables are the tables the steps went through at hook, in order.
func tracedTables(hook string, steps []Trace) []string {
	var out []string
	for _, s := range steps {
		if s.Hook == hook && !slices.Contains(out, s.Table) {
			out = append(out, s.Table)
		}
	}
	return out
}

// skipsNAT says whether a traced RETURN's chain has a NAT rule after it.
func (rs *Ruleset) skipsNAT(s *Trace) bool {
	if rs == nil || rs.Tables[s.Table] == nil || rs.Tables[s.Table].Chains[s.Chain] == nil {
		return false
	}
	rules := rs.Tables[s.Table].Chains[s.Chain].Rules
	for i := s.Position; i >= 1 && i < len(rules); i++ {
		if isNAT(rules[i].Target) {
			return true
		}
	}
	return false
}

// TracedIn says whether the steps went through the attribution's rule
// (matched it), or ended in its chain's policy.
func (a *Attribution) TracedIn(steps []Trace) bool {
	for _, s := range steps {
		if s.Table != a.Table || s.Hook != a.Hook {
			continue
		}
		if a.Rule == nil && s.Kind == TracePolicy ||
			a.Rule != nil && s.Kind == TraceRule && s.Chain == a.Rule.Chain && s.Position == a.Rule.Position {
			return true
		}
	}
	return false
}

// tracedRule is the ruleset's rule a step names (an iptables rule by its
// position, a native nftables rule by its handle), or one made of the step
// when the ruleset does not have it.
func (rs *Ruleset) tracedRule(s *Trace) *Rule {
	if rs != nil {
		if r := rs.Native.Rule(s.Table, s.Chain, s.Handle); r != nil {
			// The walkable form of the rule (the first, for a verdict
			// map's), which attributions from the ruleset point to.
			if t := rs.Tables[s.Table]; t != nil && t.Chains[s.Chain] != nil {
				c := t.Chains[s.Chain]
				for _, w := range c.Rules {
					if w.Position == r.Position {
						return w
					}
				}
			}
			return r
		}
		if t := rs.Tables[s.Table]; t != nil && t.Hooks == nil {
			if c := t.Chains[s.Chain]; c != nil && s.Position >= 1 && s.Position <= len(c.Rules) {
				return c.Rules[s.Position-1]
			}
		}
	}
	return &Rule{Table: s.Table, Chain: s.Chain, Position: s.Position, Target: strings.ToUpper(s.Verdict)}
}

// Drops says whether the attribution is of a rule or policy that dropped
// the packet (REJECT drops it too, after answering).
func (a *Attribution) Drops() bool {
	if a.Rule == nil {
		return a.Policy == "DROP"
	}
	return a.Rule.Target == "DROP" || a.Rule.Target == "REJECT"
}
