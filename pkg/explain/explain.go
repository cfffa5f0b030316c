// Package explain runs nettrace's rules over finished flows: each rule
// looks for one kind of failure in the flow's events and, when it finds
// it, says what went wrong in one sentence with the events that show it.
// Rules are tried in root-cause order and only the first that fires is
// reported, so one failure gives one finding (the rp_filter drop of
// incident 1 is evidence of the missing SNAT, not a second finding).
package explain

import (
	"net/netip"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// Context is what the rules know beyond the flow, passed to them
// explicitly: the names of kernel numbers, and the namespaces' rulesets
// and rule traces that let findings name the rules that decided.
type Context interface {
	NetnsName(ino uint32) string
	ReasonName(r uint32) string
	// SymbolName names a kernel address ("neigh_invalidate+0x7e").
	SymbolName(addr uint64) string
	// Ruleset is a namespace's ruleset in force at a kernel time; nil
	// when unknown.
	Ruleset(netns uint32, at uint64) *ruleset.Ruleset
	// RuleTrace is what nftables tracing reported of a packet seen with
	// tuple p at hook in netns at kernel time at (ruleset.Traces.Pass);
	// nil when it was not traced.
	RuleTrace(netns uint32, hook string, p ruleset.Packet, at uint64) []ruleset.Trace
	// PodName names the Kubernetes pod (namespace/name) an address
	// belongs to; "" when none is known.
	PodName(addr netip.Addr) string
	// NodeName names the Kubernetes node an address belongs to; "" when
	// none is known.
	NodeName(addr netip.Addr) string
	// ServiceAt is the Kubernetes Service a packet of protocol sent to
	// dst reached, as the API lists Services' frontends; false when none
	// is known.
	ServiceAt(protocol uint8, dst netip.AddrPort) (service.Service, bool)
	// SNATedBefore is the first packet of the latest conntrack entry,
	// other than entry ct, that SNAT gave tuple t in netns before kernel
	// time at (flow.SNATs.Before): the connection another one clashed
	// with. False when none is known.
	SNATedBefore(netns uint32, t event.Tuple, ct, at uint64) (event.Event, bool)
}

// Finding is one explanation of a flow.
type Finding struct {
	Rule     string
	Severity string
	Summary  string
	Evidence []Evidence
	// NetfilterRules are the netfilter rules behind the failure, when
	// the namespace's ruleset is known.
	NetfilterRules []NetfilterRule
	// Service is the Kubernetes Service the failed request was sent to,
	// when a DNAT sent it on (serviceOf).
	Service *service.Service
	// Pods are the pods the summary names by their addresses, in order.
	Pods []Pod
	// restsOnAbsence: the finding follows from records not seen (no
	// reply, no conntrack entry crossed, no tunnel device), which a flow
	// that lost records cannot tell from things that did not happen.
	restsOnAbsence bool
}

// Evidence is an event that supports a finding, and what it shows.
type Evidence struct {
	Event event.Event
	Fact  string
}

// Rule looks for one failure in a flow.
type Rule struct {
	ID    string
	Check func(f *flow.Flow, n Context) *Finding
	// Triggers are what ships the rule's evidence past the kernel gate
	// (triggers.go): each flow it fires on shows one of them.
	Triggers []Trigger
}

// Rules in root-cause order: a rule earlier in the list explains the
// evidence later rules would also see.
var Rules = []Rule{
	{"snat-missing-on-tunnel", snatMissingOnTunnel, []Trigger{TriggerDrop, TriggerSYNAgain, TriggerSYNACKAgain}},
	{"syn-dropped-at-listener", synDroppedAtListener, []Trigger{TriggerListener}},
	{"bridge-hairpin-off", bridgeHairpinOff, []Trigger{TriggerDrop, TriggerSYNAgain}},
	{"stale-conntrack-entry", staleConntrackEntry, []Trigger{Ungated}},
	{"dnat-to-dead-endpoint", dnatToDeadEndpoint, []Trigger{TriggerDrop, TriggerSYNAgain}},
	{"conntrack-invalid", conntrackInvalid, []Trigger{TriggerInvalid}},
	{"reply-bypassed-nat", replyBypassedNAT, []Trigger{TriggerReset}},
	{"conntrack-clash", conntrackClash, []Trigger{TriggerDrop}},
	{"conntrack-table-full", conntrackTableFull, []Trigger{TriggerDrop}},
	{"mtu-black-hole", mtuBlackHole, []Trigger{TriggerDrop}},
	{"dropped-by-netfilter", droppedByNetfilter, []Trigger{TriggerDrop}},
	{"no-listener", noListener, []Trigger{TriggerReset}},
	{"reply-dropped-rpfilter", replyDroppedRPFilter, []Trigger{TriggerDrop}},
	{"no-reply", noReply, []Trigger{TriggerSYNAgain, TriggerConnectGivenUp}},
}

// withheld says whether a finding is withheld from a flow: one that rests
// on absence, from a flow that may have lost records.
func withheld(f *flow.Flow, restsOnAbsence bool) bool {
	return restsOnAbsence && f.LostAround > 0
}

// Explain returns the root-cause finding for a flow, or nil for a flow
// that shows no failure. A flow that may have lost records (LostAround)
// is explained by what it shows only: a finding resting on what it lacks
// is withheld, and a later rule may still explain it by what it shows.
func Explain(f *flow.Flow, n Context) *Finding {
	if groupManagement(f.Tuple()) != "" {
		// IGMP and MLD keep the link's multicast memberships, repeated on
		// timers; their drops are labelled (Ordinary), no connection fails.
		return nil
	}
	for _, r := range Rules {
		if fd := r.Check(f, n); fd != nil {
			if withheld(f, fd.restsOnAbsence) {
				continue
			}
			fd.Rule = r.ID
			if fd.Severity == "" {
				fd.Severity = "error"
			}
			return fd
		}
	}
	return nil
}
