package explain

import "github.com/nettrace-dev/nettrace/pkg/flow"

// Report is what the renderers show of a finished flow beyond its events,
// decided here once so that text, JSON and pcapng only render it: the
// flow's finding and what its packets and their steps mean.
type Report struct {
	Finding *Finding // nil: the flow shows no failure
	// Packets, one per packet of the flow; their steps when Detail asked
	// for them.
	Packets []Packet
	// Socket, when Detail asked for steps: what each socket event did.
	Socket []Step
}

// Detail says which per-step annotations a report carries: words for
// every step cost what only a flow shown whole needs, and naming the NAT
// rules walks the namespaces' rulesets, which only the renderers that show
// them (JSON, pcapng) pay for.
type Detail struct {
	Steps    Flows
	NATRules Flows // implies Steps
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

// of says whether flows annotates a flow with or without a finding.
func (flows Flows) of(fd *Finding) bool {
	return flows == AllFlows || (flows == FlowsWithFinding && fd != nil)
}

// NewReport explains a finished flow with a packet, and annotates its
// packets as d asks.
func NewReport(f *flow.Flow, n Context, d Detail) *Report {
	r := &Report{Finding: Explain(f, n), Packets: make([]Packet, len(f.Packets))}
	rules := d.NATRules.of(r.Finding)
	steps := rules || d.Steps.of(r.Finding)
	for i, p := range f.Packets {
		r.Packets[i] = newPacket(f, i, n, steps)
		if !rules {
			continue
		}
		for k, named := range PacketNATRules(n, p) {
			r.Packets[i].Steps[k].NATRules = named
		}
	}
	for i := 0; steps && i < len(f.Socket); i++ {
		r.Socket = append(r.Socket, Step{What: StepWords(n, f, &f.Socket[i])})
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

// Found is the report's finding; nil for none, or no report.
func (r *Report) Found() *Finding {
	if r == nil {
		return nil
	}
	return r.Finding
}
