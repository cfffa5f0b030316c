package explain

import (
	"fmt"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// droppedByNetfilter: a packet of the flow was dropped by a netfilter
// verdict. The drop itself does not carry its hook; the last hook the
// packet was seen at says which ones can have dropped it.
func droppedByNetfilter(f *flow.Flow, n Context) *Finding {
	if beginsWithSYNACK(f) {
		return nil
	}
	p, drop := netfilterDrop(f, n)
	if drop == nil {
		return nil
	}
	rules, last := netfilterDropRules(n, p, drop)
	t := drop.Current()
	what := packetWord(t)
	fd := &Finding{
		Evidence:       []Evidence{evidence(n, drop, "dropped on %s: NETFILTER_DROP (%s)", where(n, drop), hookAfter(last))},
		NetfilterRules: rules,
	}
	fd.Evidence = append(fd.Evidence, ruleFacts(n, drop, fd.NetfilterRules)...)
	if c := ruleClause(fd.NetfilterRules); c != "" {
		// The rule says the hook.
		decided := fd.NetfilterRules[0]
		fd.Service = decided.Service
		fd.Summary = fmt.Sprintf("%s %s -> %s was dropped by %s in %s %s%s.",
			what, fd.atPod(n, src(t)), withService(dst(t), fd.Service), strings.TrimSuffix(c, " decided"), n.NetnsName(drop.Netns),
			strings.Join(append([]string{decided.Hook}, decided.OrHooks...), " or "), kubeProxyWhy(decided))
		return fd
	}
	fd.Summary = fmt.Sprintf("%s %s -> %s was dropped by a netfilter DROP verdict in %s, %s.",
		what, fd.atPod(n, src(t)), fd.atPod(n, dst(t)), n.NetnsName(drop.Netns), hookAfter(last))
	return fd
}

// kubeProxyWhy says why kube-proxy dropped a packet: in iptables mode
// from the rule's comment, in nftables mode from the verdict map whose
// element led to the rule (its maps are named for what they do). "" for
// any other rule.
func kubeProxyWhy(r NetfilterRule) string {
	if name, after, ok := strings.Cut(r.Comment, " "); ok && serviceOfComment(name) != nil {
		if why := kubeProxyDrop(after); why != "" {
			return ": " + why
		}
	}
	for _, v := range r.Via {
		rule, element, ok := strings.Cut(v, ", element ")
		if !ok {
			continue
		}
		_, name, _ := strings.Cut(rule, "vmap @")
		via := fmt.Sprintf(", reached by kube-proxy's %s element %s", name, element)
		switch name {
		case "no-endpoint-services", "no-endpoint-nodeports":
			return via + ": " + kubeProxyDrop("has no endpoints")
		case "firewall-ips":
			return via + ": the source is not in the Service's loadBalancerSourceRanges"
		}
	}
	return ""
}

// netfilterDrop finds the flow's first packet dropped by a netfilter
// verdict. Only the flow's own packets: a related ICMP message (a
// redirect the router sends) that netfilter drops is not the connection
// failing.
func netfilterDrop(f *flow.Flow, n Context) (*flow.Packet, *event.Event) {
	proto := f.Tuple().Proto
	return find(f, func(_ *flow.Packet, e *event.Event) bool {
		return dropped(n, e, "NETFILTER_DROP") && e.Current().Proto == proto
	})
}

// netfilterDropRules names the rule that dropped packet p at drop, from the
// hooks it can have been dropped at: those after the last NAT hook p was
// seen at in the drop's namespace, which it returns.
func netfilterDropRules(n Context, p *flow.Packet, drop *event.Event) ([]NetfilterRule, event.Hook) {
	last, state := event.HookNone, ""
	if nat := lastNAT(p, drop); nat != nil {
		last = nat.Hook
		if nat.Flags&event.FlagCTInvalid != 0 {
			state = "INVALID"
		}
	}
	return dropRules(n, drop, state, hooksAfter(last)...), last
}

// hooksAfter lists the hooks whose filter, mangle or raw chains can have
// dropped a packet last seen at a NAT hook (see hookAfter).
func hooksAfter(last event.Hook) []event.Hook {
	switch last {
	case event.HookPrerouting:
		return []event.Hook{event.HookInput, event.HookForward}
	case event.HookOutput:
		return []event.Hook{event.HookOutput, event.HookPostrouting}
	case event.HookInput:
		return []event.Hook{event.HookInput}
	case event.HookPostrouting:
		return []event.Hook{event.HookPostrouting}
	}
	// No NAT hook seen: before any, or in a namespace where nothing
	// registers one (the nat point's fentry and kprobe methods see only
	// namespaces with NAT): any hook.
	return []event.Hook{event.HookPrerouting, event.HookInput, event.HookForward, event.HookOutput, event.HookPostrouting}
}

// hookAfter names the hooks a drop can have happened in, given the last
// NAT hook the packet passed (the nat point sits at the NAT priorities;
// filter chains run at priority 0).
func hookAfter(last event.Hook) string {
	switch last {
	case event.HookPrerouting:
		return "after PREROUTING: in the INPUT or FORWARD filter chains"
	case event.HookOutput:
		return "in OUTPUT after NAT (filter table)"
	case event.HookInput:
		return "in INPUT after NAT"
	case event.HookPostrouting:
		return "in POSTROUTING after NAT"
	}
	return "before NAT (raw or mangle table, or a filter chain in a namespace not watched)"
}
