package explain

import "github.com/nettrace-dev/nettrace/pkg/flow"

// Report is what the renderers show of a finished flow beyond its events,
// decided here once so that text, JSON and pcapng only render it: the
// flow's finding and what its packets' steps mean.
type Report struct {
	Finding *Finding // nil: the flow shows no failure
	// Ordinary, per packet: what the kernel did in its ordinary work when
	// it freed the packet without a reason ("" for none).
	Ordinary []string
	// NATRules, per packet and step, when Detail asked for them: the
	// netfilter rules that decided a connection's first packet's NAT
	// hooks (nil where none are known).
	NATRules [][][]NetfilterRule
}

// Detail says which per-step annotations a report carries: naming the NAT
// rules of every packet walks the namespaces' rulesets, which only the
// renderers that show them (JSON, pcapng) pay for, and only for the flows
// they show whole.
type Detail struct {
	NATRules Flows
}

// Flows says which flows a report annotates.
type Flows int

const (
	// NoFlows annotates none.
	NoFlows Flows = iota
	// FlowsWithFinding annotates the flows with a finding only.
	FlowsWithFinding
	// AllFlows annotates every flow.
	AllFlows
)

// NewReport explains a finished flow with a packet, and annotates its
// packets as d asks.
func NewReport(f *flow.Flow, n Context, d Detail) *Report {
	r := &Report{Finding: Explain(f, n), Ordinary: make([]string, len(f.Packets))}
	for i := range f.Packets {
		r.Ordinary[i] = Ordinary(f, i, n)
	}
	if d.NATRules == AllFlows || (d.NATRules == FlowsWithFinding && r.Finding != nil) {
		r.NATRules = make([][][]NetfilterRule, len(f.Packets))
		for i := range f.Packets {
			r.NATRules[i] = PacketNATRules(n, f.Packets[i])
		}
	}
	return r
}

// Rule is the rule ID of the report's finding, "" for none.
func (r *Report) Rule() string {
	if r == nil || r.Finding == nil {
		return ""
	}
	return r.Finding.Rule
}
