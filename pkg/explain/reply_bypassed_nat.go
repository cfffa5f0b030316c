package explain

import (
	"fmt"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// replyBypassedNAT: a reply reached the client from the real endpoint's
// address, because it never crossed the conntrack entry of the NAT that
// translated the request (hairpin, asymmetric path).
func replyBypassedNAT(f *flow.Flow, n Context) *Finding {
	dp, d := dnat(f)
	if d == nil || !d.HasCT() {
		return nil
	}
	clientNetns, ok := clientNetnsOf(f, d)
	if !ok || clientNetns == d.Netns {
		return nil
	}
	cl := client(f)
	for _, p := range f.Packets {
		if !isReply(f, p) {
			continue
		}
		var atClient *event.Event
		crossedNAT := false
		for i := range p.Events {
			e := &p.Events[i]
			if e.HasCT() && e.CT.ID == d.CT.ID {
				crossedNAT = true
			}
			t := e.Current()
			if atClient == nil && e.Netns == clientNetns && t.Src == d.Tuple.Dst && t.Sport == d.Tuple.Dport && dst(t) == cl {
				atClient = e
			}
		}
		if atClient == nil || crossedNAT {
			continue
		}
		// Not crossing the entry is the absence of its mark on the reply.
		fd := &Finding{Evidence: []Evidence{evidence(n, d, "%s", natFact(n, d))}, NetfilterRules: natRules(n, dp, d), restsOnAbsence: true}
		fd.Evidence = append(fd.Evidence, ruleFacts(n, d, fd.NetfilterRules)...)
		fd.Service = serviceOf(n, dp, d, fd.NetfilterRules)
		how := "and not SNATed, so"
		if post := natAt(f.Packets[0], d.Netns, event.HookPostrouting); post != nil {
			fd.Evidence = append(fd.Evidence, evidence(n, post, "%s", natFact(n, post)))
		}
		if requestSNAT(f, d.Netns) != nil {
			how = "and SNATed, yet"
		}
		fd.Evidence = append(fd.Evidence, evidence(n, atClient, "reply from %s reached %s without crossing %s's conntrack entry",
			src(atClient.Current()), where(n, atClient), n.NetnsName(d.Netns)))
		summary := fmt.Sprintf("reply from %s to %s bypassed the NAT that translated the request: the client called %s and received from %s; the request was DNATed in %s %s %s the reply went straight to the client (%s) without crossing that conntrack entry",
			fd.atPod(n, dst(d.Tuple)), fd.atPod(n, cl), withService(dst(d.NAT.Pre), fd.Service), dst(d.Tuple), n.NetnsName(d.Netns), d.Hook, how, n.NetnsName(clientNetns))
		// The reset shows as the tcp point's reset (where the kernel traces
		// resets sent without a socket) or as the reset packet leaving.
		if _, rst := find(f, func(_ *flow.Packet, e *event.Event) bool {
			return e.Netns == clientNetns && ((e.Point == event.PointTCP && e.Kind == event.KindResetSent) ||
				(e.Point != event.PointTCP && e.Current().TCPFlags&tcpRST != 0 && src(e.Current()) == cl))
		}); rst != nil {
			summary += ", which reset it"
			fd.Evidence = append(fd.Evidence, evidence(n, rst, "%s answered the unexpected reply with a reset", n.NetnsName(clientNetns)))
		}
		if c := ruleClause(fd.NetfilterRules); c != "" {
			summary += "; the DNAT: " + strings.TrimSuffix(c, " decided")
		}
		fd.Summary = summary + "."
		return fd
	}
	return nil
}

// clientNetnsOf is the namespace the client sent from: where a request is
// first seen still addressed to what the client called (the DNAT's tuple
// before). The flow's first packet does not say it: a flow whose first
// packets the trace missed (they left before it began) starts with a
// request already past the DNAT, in the endpoint's node, where every reply
// is first seen before it crosses the NAT host.
func clientNetnsOf(f *flow.Flow, d *event.Event) (uint32, bool) {
	called := dst(d.NAT.Pre)
	for _, p := range f.Packets {
		if isReply(f, p) {
			continue
		}
		if h := p.Head(); dst(h.Current()) == called {
			return h.Netns, true
		}
	}
	return 0, false
}
