package output

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// JSONStep is one event of a packet's path.
type JSONStep struct {
	OffsetUS float64    `json:"offset_us"`
	Netns    string     `json:"netns,omitempty"`
	Dev      string     `json:"dev,omitempty"`
	Point    string     `json:"point"`
	Kind     string     `json:"kind"`
	Hook     string     `json:"hook,omitempty"`
	What     string     `json:"what"`
	Tuple    *JSONTuple `json:"tuple"`
	Outer    *JSONTuple `json:"outer,omitempty"` // encapsulated: the tunnel's tuple (Tuple is the inner one)
	// Translations, on a nat step, say what it did in the connection's
	// terms: "dnat", "snat" (the request's), "undnat", "unsnat" (a
	// reply's, undoing them); event.Translation.
	Translations []string `json:"translations,omitempty"`
	// NetfilterRules, on a nat step of a connection's first packet, are
	// the rules that decided it, when the namespace's ruleset is known.
	NetfilterRules []JSONNetfilterRule `json:"netfilter_rules,omitempty"`
	// Lost says the packet was lost at this step: dropped (not in the
	// kernel's ordinary work), or dropped by the listener it reached
	// (explain.Step.Lost).
	Lost bool `json:"lost,omitempty"`
}

// JSONPacket is one packet of a flow.
type JSONPacket struct {
	Skb       string     `json:"skb"`
	Direction string     `json:"direction"`
	Label     string     `json:"label"`
	Tuple     *JSONTuple `json:"tuple"`
	// Steps are the packet's path, left out of a brief flow.
	Steps []JSONStep `json:"steps,omitempty"`
	End   string     `json:"end"`
	// Ordinary, for a packet the kernel freed without a reason in its
	// ordinary work or a dropped multicast group management message, says
	// what that was (explain.Ordinary); End and the drop step keep the
	// kernel's own words.
	Ordinary string `json:"ordinary,omitempty"`
}

// JSONFlow is the schema of {"type":"flow"} objects.
type JSONFlow struct {
	Type       string       `json:"type"`
	ID         uint64       `json:"id"`
	Start      time.Time    `json:"start"`
	DurationMS float64      `json:"duration_ms"`
	Tuple      *JSONTuple   `json:"tuple"`
	Packets    []JSONPacket `json:"packets"`
	Socket     []JSONStep   `json:"socket,omitempty"`
	Unkept     uint64       `json:"events_not_kept,omitempty"`
	// LostAround counts the records lost while the flow was open: it is
	// incomplete, and no finding rests on what it lacks.
	LostAround uint64 `json:"records_lost_around,omitempty"`
	Incomplete bool   `json:"incomplete,omitempty"`
	Finding    string `json:"finding,omitempty"`
	// Brief: a flow without a finding shown with its packets but not
	// their steps (--timelines brief).
	Brief bool `json:"brief,omitempty"`
}

// JSONEvidence is one event backing an explanation.
type JSONEvidence struct {
	Time  time.Time `json:"time"`
	Netns string    `json:"netns,omitempty"`
	Dev   string    `json:"dev,omitempty"`
	Point string    `json:"point"`
	Kind  string    `json:"kind"`
	Hook  string    `json:"hook,omitempty"`
	Skb   string    `json:"skb,omitempty"`
	Fact  string    `json:"fact"`
}

// JSONFlowRef identifies the flow an explanation is about.
type JSONFlowRef struct {
	ID    uint64     `json:"id"`
	Tuple *JSONTuple `json:"tuple"`
}

// JSONExplanation is the schema of {"type":"explanation"} objects.
type JSONExplanation struct {
	Type     string         `json:"type"`
	Rule     string         `json:"rule"`
	Severity string         `json:"severity"`
	Summary  string         `json:"summary"`
	Flow     JSONFlowRef    `json:"flow"`
	Evidence []JSONEvidence `json:"evidence"`
	// NetfilterRules are the rules behind the finding, when the
	// namespace's ruleset is known (explain.NetfilterRule).
	NetfilterRules []JSONNetfilterRule `json:"netfilter_rules,omitempty"`
	// Service is the Kubernetes Service the failed request was sent to,
	// when a DNAT sent it on (service.Service).
	Service *JSONService `json:"service,omitempty"`
	// Pods are the pods the summary names by their addresses
	// (explain.Pod).
	Pods []JSONPod `json:"pods,omitempty"`
}

// JSONPod is a Kubernetes pod, named by one of its addresses.
type JSONPod struct {
	Address string `json:"address"`
	Pod     string `json:"pod"` // namespace/name
}

// JSONService is a Kubernetes Service, as kube-proxy's rules or the API name it.
type JSONService struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Port      string `json:"port,omitempty"`    // the port's name
	Address   string `json:"address,omitempty"` // cluster IP, external IP, load balancer IP, node port
}

func jsonService(s *service.Service) *JSONService {
	if s == nil {
		return nil
	}
	return &JSONService{Namespace: s.Namespace, Name: s.Name, Port: s.Port, Address: s.Address}
}

// JSONNetfilterRule is a netfilter rule a finding names.
type JSONNetfilterRule struct {
	Netns string `json:"netns"`
	Hook  string `json:"hook"`
	// OrHooks are the other hooks the same rule can have decided at.
	OrHooks  []string `json:"or_hooks,omitempty"`
	Table    string   `json:"table"`
	Chain    string   `json:"chain"`
	Position int      `json:"position"`         // 1-based in its chain; 0: the chain's policy decided
	Handle   uint64   `json:"handle,omitempty"` // nftables handle, when traced
	Text     string   `json:"text,omitempty"`
	Comment  string   `json:"comment,omitempty"`
	Via      []string `json:"via,omitempty"`
	Verdict  string   `json:"verdict"`
	Role     string   `json:"role"`
	Source   string   `json:"source"`
	Assumed  []string `json:"assumed,omitempty"`
	// Service is the Kubernetes Service of a decided DNAT of kube-proxy's.
	Service *JSONService `json:"service,omitempty"`
}

// step is the JSON of one event of a flow, with what its report says of it.
func (n Names) step(f *flow.Flow, e *event.Event, rs explain.Step) JSONStep {
	s := JSONStep{OffsetUS: float64(int64(e.Time)-int64(f.Start)) / 1e3, Netns: n.netns(e.Netns), Dev: e.Ifname.String(),
		Point: e.Point.String(), Kind: e.Kind.String(), Hook: e.Hook.String(), What: rs.What, Tuple: NewJSONTuple(e.Tuple),
		NetfilterRules: n.jsonRules(rs.NATRules), Lost: rs.Lost}
	if e.HasInner() {
		s.Tuple, s.Outer = NewJSONTuple(e.Inner), NewJSONTuple(e.Tuple)
	}
	s.Translations = e.Translation().Names()
	return s
}

// FlowObjects are the JSON objects shown of a finished flow, as t asks:
// none for a flow without a finding under TimelinesFindings, its packets
// without their steps under TimelinesBrief; otherwise the flow whole, then
// its finding's explanation.
func (n Names) FlowObjects(f *flow.Flow, r *explain.Report, t Timelines) []any {
	switch {
	case r.Finding != nil:
		return []any{n.ConvertFlow(f, r), n.ConvertFinding(f, r.Finding)}
	case t == TimelinesFindings:
		return nil
	case t == TimelinesBrief:
		return []any{n.convertFlow(f, r, false)}
	}
	return []any{n.ConvertFlow(f, r)}
}

// ConvertFlow builds the JSON object of a flow, whole.
func (n Names) ConvertFlow(f *flow.Flow, r *explain.Report) *JSONFlow {
	return n.convertFlow(f, r, true)
}

// convertFlow builds the JSON object of a flow, with its packets' steps
// or brief.
func (n Names) convertFlow(f *flow.Flow, r *explain.Report, steps bool) *JSONFlow {
	j := &JSONFlow{Type: "flow", ID: f.ID, Start: n.wall(f.Start), DurationMS: float64(f.End-f.Start) / 1e6, Tuple: NewJSONTuple(f.Tuple()),
		Unkept: f.Unkept, LostAround: f.LostAround, Incomplete: f.LostAround > 0, Brief: !steps}
	for k, p := range f.Packets {
		rp := &r.Packets[k]
		jp := JSONPacket{Skb: fmt.Sprintf("%#x", p.Skb), Direction: rp.Direction, Label: rp.Label, Tuple: NewJSONTuple(rp.Tuple),
			End: rp.End, Ordinary: rp.Ordinary}
		for i := 0; steps && i < len(p.Events); i++ {
			jp.Steps = append(jp.Steps, n.step(f, &p.Events[i], rp.Steps[i]))
		}
		j.Packets = append(j.Packets, jp)
	}
	for i := 0; steps && i < len(f.Socket); i++ {
		j.Socket = append(j.Socket, n.step(f, &f.Socket[i], r.Socket[i]))
	}
	j.Finding = r.Rule()
	return j
}

// ConvertFinding builds the JSON object of an explanation.
func (n Names) ConvertFinding(f *flow.Flow, fd *explain.Finding) *JSONExplanation {
	j := &JSONExplanation{Type: "explanation", Rule: fd.Rule, Severity: fd.Severity, Summary: fd.Summary,
		Flow: JSONFlowRef{ID: f.ID, Tuple: NewJSONTuple(f.Tuple())}}
	for _, ev := range fd.Evidence {
		e := ev.Event
		je := JSONEvidence{Time: n.wall(e.Time), Netns: n.netns(e.Netns), Dev: e.Ifname.String(), Point: e.Point.String(),
			Kind: e.Kind.String(), Hook: e.Hook.String(), Fact: ev.Fact}
		if e.Skb != 0 {
			je.Skb = fmt.Sprintf("%#x", e.Skb)
		}
		j.Evidence = append(j.Evidence, je)
	}
	j.NetfilterRules = n.jsonRules(fd.NetfilterRules)
	j.Service = jsonService(fd.Service)
	for _, p := range fd.Pods {
		j.Pods = append(j.Pods, JSONPod{Address: p.Address.String(), Pod: p.Name})
	}
	return j
}

func (n Names) jsonRules(rules []explain.NetfilterRule) []JSONNetfilterRule {
	var out []JSONNetfilterRule
	for _, r := range rules {
		out = append(out, JSONNetfilterRule{Netns: n.netns(r.Netns), Hook: r.Hook, OrHooks: r.OrHooks, Table: r.Table, Chain: r.Chain,
			Position: r.Position, Text: r.Text, Comment: r.Comment, Via: r.Via, Verdict: r.Verdict, Role: r.Role,
			Source: r.Source, Assumed: r.Assumed, Handle: r.Handle, Service: jsonService(r.Service)})
	}
	return out
}

// JSONFlows renders finished flows as JSON lines (FlowObjects): the flow
// renderer of -o json when events are not shown among them.
type JSONFlows struct {
	Names     Names
	Timelines Timelines
}

// AppendFlow appends the lines of a flow's objects to b.
func (j JSONFlows) AppendFlow(b []byte, f *flow.Flow, r *explain.Report) []byte {
	for _, obj := range j.Names.FlowObjects(f, r, j.Timelines) {
		// Marshal cannot fail on these: every field is a plain value, a
		// string, or a slice of them.
		line, _ := json.Marshal(obj)
		b = append(append(b, line...), '\n')
	}
	return b
}
