package probe

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// DefaultHeldRecords bounds the records the gate holds at once: about
// 4.9 KB each (a journey's room), so 40 MiB of kernel memory, enough for
// about 800 connections in flight at 10 records each. Past it the least
// recently held go first, and a connection in trouble that lacks them is
// incomplete.
const DefaultHeldRecords = 8192

// gateConns bounds the connections (and their aliases) the gate follows.
const gateConns = 65536

// gateOn says whether the kernel gate runs: asked for, and no filter (a
// filter's connections are traced whole).
func (t *Tracer) gateOn() bool {
	return t.opts.HealthyCount && (t.opts.Filter == nil || len(t.opts.Filter.Insns) == 0)
}

func (t *Tracer) gateFlag() uint32 {
	if t.gateOn() {
		return 1
	}
	return 0
}

// sizeGateMap sizes the gate's maps: one entry each while it is off, so
// that an idle gate costs no kernel memory.
func (t *Tracer) sizeGateMap(ms *ebpf.MapSpec) {
	switch ms.Name {
	case "held":
		ms.MaxEntries = 1
		if t.gateOn() {
			ms.MaxEntries = DefaultHeldRecords
			if t.opts.HeldRecords > 0 {
				ms.MaxEntries = t.opts.HeldRecords
			}
		}
	case "conns":
		ms.MaxEntries = 1
		if t.gateOn() {
			ms.MaxEntries = gateConns
		}
	}
}

// gateStat are the gate_stats keys (enum nt_gate_stat in
// bpf/include/nettrace.h; enums_test.go checks them).
const (
	gateHeld uint32 = iota
	gateReleased
	gateHealthy
	gateDiscarded
	gateTriggered
	gateMissing
	gateStats
)

// Gate reads the gate's counters, summed over CPUs: all zero while it is off.
func (t *Tracer) Gate() (event.GateCounts, error) {
	var g event.GateCounts
	if !t.gateOn() {
		return g, nil
	}
	for stat, to := range map[uint32]*uint64{gateHeld: &g.Held, gateReleased: &g.Released, gateHealthy: &g.Healthy,
		gateDiscarded: &g.Discarded, gateTriggered: &g.Triggered, gateMissing: &g.Missing} {
		var perCPU []uint64
		if err := t.maps["gate_stats"].Lookup(stat, &perCPU); err != nil {
			return g, fmt.Errorf("read the gate's counters: %w", err)
		}
		for _, n := range perCPU {
			*to += n
		}
	}
	return g, nil
}

// GateOn says whether the kernel holds healthy connections' records.
func (t *Tracer) GateOn() bool { return t.gateOn() }
