package explain

import (
	"net/netip"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// Namer names kernel numbers: the words of a finding need them.
type Namer interface {
	NetnsName(ino uint32) string
	ReasonName(r uint32) string
	SymbolName(addr uint64) string
}

// Sources is the Context the rules run with on a node or over a recording:
// the names of kernel numbers, and what else is known; each func may be
// nil (nothing known).
type Sources struct {
	Names Namer
	// Rulesets gives a namespace's ruleset in force at a CLOCK_MONOTONIC
	// time: findings then name their rules.
	Rulesets func(netns uint32, at uint64) *ruleset.Ruleset
	// RuleTraces gives what nftables tracing reported of a packet
	// (ruleset.Traces.Pass): findings then name the rules it went through.
	RuleTraces func(netns uint32, hook string, p ruleset.Packet, at uint64) []ruleset.Trace
	// Pods gives the pods' addresses (namespace/name) and their
	// generation, which changes when they do.
	Pods func() (uint64, map[netip.Addr]string)
	// Nodes gives the nodes' addresses (node name) and their generation.
	Nodes func() (uint64, map[netip.Addr]string)
	// Services gives the Services' frontends and their generation.
	Services func() (uint64, *service.Table)
	// SNATs are the entries SNAT gave a source (the correlator's index):
	// a conntrack clash then names the connection it lost to.
	SNATs *flow.SNATs
}

// NetnsName names a namespace inode.
func (s Sources) NetnsName(ino uint32) string { return s.Names.NetnsName(ino) }

// ReasonName names a drop reason.
func (s Sources) ReasonName(r uint32) string { return s.Names.ReasonName(r) }

// SymbolName names a kernel address.
func (s Sources) SymbolName(addr uint64) string { return s.Names.SymbolName(addr) }

// PodAddresses returns the pods' addresses, if known.
func (s Sources) PodAddresses() (uint64, map[netip.Addr]string) {
	if s.Pods == nil {
		return 0, nil
	}
	return s.Pods()
}

// PodName names the pod an address belongs to, "" when none is known.
func (s Sources) PodName(a netip.Addr) string {
	_, pods := s.PodAddresses()
	return pods[a]
}

// NodeAddresses returns the nodes' addresses, if known.
func (s Sources) NodeAddresses() (uint64, map[netip.Addr]string) {
	if s.Nodes == nil {
		return 0, nil
	}
	return s.Nodes()
}

// NodeName names the node an address belongs to, "" when none is known.
func (s Sources) NodeName(a netip.Addr) string {
	_, nodes := s.NodeAddresses()
	return nodes[a]
}

// ServiceFrontends returns the Services' frontends, if known.
func (s Sources) ServiceFrontends() (uint64, *service.Table) {
	if s.Services == nil {
		return 0, nil
	}
	return s.Services()
}

// ServiceAt names the Service a packet reached, if known: a node port
// only at an address the API lists as a node's.
func (s Sources) ServiceAt(protocol uint8, dst netip.AddrPort) (service.Service, bool) {
	_, t := s.ServiceFrontends()
	return t.At(protocol, dst, s.NodeName(dst.Addr()) != "")
}

// Ruleset returns a namespace's ruleset at a time, if known.
func (s Sources) Ruleset(netns uint32, at uint64) *ruleset.Ruleset {
	if s.Rulesets == nil {
		return nil
	}
	return s.Rulesets(netns, at)
}

// RuleTrace returns the traced steps of a packet, if any.
func (s Sources) RuleTrace(netns uint32, hook string, p ruleset.Packet, at uint64) []ruleset.Trace {
	if s.RuleTraces == nil {
		return nil
	}
	return s.RuleTraces(netns, hook, p, at)
}

// SNATedBefore returns the entry SNAT gave a tuple before another, if known.
func (s Sources) SNATedBefore(netns uint32, t event.Tuple, ct, at uint64) (event.Event, bool) {
	return s.SNATs.Before(netns, t, ct, at)
}
