package explain

import (
	"fmt"
	"slices"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// dnatToDeadEndpoint: the request was DNATed to an address that never
// answered: its neighbour could not be resolved, it had no route, or
// nothing came back from it.
func dnatToDeadEndpoint(f *flow.Flow, n Context) *Finding {
	p, d := dnat(f)
	if d == nil {
		return nil
	}
	endpoint := d.Tuple.Dst
	for _, p := range f.Packets {
		if isReply(f, p) && p.Head().Current().Src == endpoint {
			return nil // it answered
		}
		if slices.ContainsFunc(p.Events, func(e event.Event) bool { return e.Point == event.PointSYN }) {
			return nil // a listener there took the SYN: the address is alive
		}
	}
	var cause *event.Event
	causes := 0
	for _, p := range f.Packets {
		for i := range p.Events {
			e := &p.Events[i]
			if e.Point == event.PointDrop && e.Current().Dst == endpoint {
				if noWay(n, e) {
					causes++
					if cause == nil {
						cause = e
					}
				}
			}
		}
	}
	syns, last := countSYNs(f)
	if cause == nil && syns < 2 {
		return nil // one unanswered SYN is not yet evidence of anything
	}
	fd := &Finding{Evidence: []Evidence{evidence(n, d, "%s", natFact(n, d))}, NetfilterRules: natRules(n, p, d)}
	fd.Evidence = append(fd.Evidence, ruleFacts(n, d, fd.NetfilterRules)...)
	fd.Service = serviceOf(n, p, d, fd.NetfilterRules)
	by := ""
	if c := ruleClause(fd.NetfilterRules); c != "" {
		by = " (" + c + ")"
	}
	summary := fmt.Sprintf("SYN to %s was DNATed to %s in %s %s%s; that address never answered: ",
		withService(dst(d.NAT.Pre), fd.Service), fd.atPod(n, dst(d.Tuple)), n.NetnsName(d.Netns), d.Hook, by)
	if cause != nil {
		reason := n.ReasonName(cause.Drop.Reason)
		what := "there is no route to it"
		if neighbourFailed(n, cause) {
			what = "neighbour resolution failed (no host answered ARP for it)"
			if endpoint.Is6() {
				what = "neighbour resolution failed (no host answered neighbour discovery for it)"
			}
			if reason != "NEIGH_FAILED" {
				reason = "freed by " + n.SymbolName(cause.Drop.Location) + " without a reason"
			}
		}
		summary += fmt.Sprintf("%s on %s (%s, %s)", what, where(n, cause), reason, plural(causes, "packet"))
		fd.Evidence = append(fd.Evidence, evidence(n, cause, "packet to %s dropped on %s: %s", endpoint, where(n, cause), reason))
	} else {
		fd.restsOnAbsence = true
		summary += fmt.Sprintf("nothing came back after %d SYNs, last seen on %s", syns, where(n, last))
		fd.Evidence = append(fd.Evidence, evidence(n, last, "SYN last seen on %s (%s %s)", where(n, last), last.Point, last.Kind))
	}
	fd.Summary = summary + "."
	return fd
}
