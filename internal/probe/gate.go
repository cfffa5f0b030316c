package probe

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/nettrace-dev/nettrace/internal/kernel"
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
func (t *Tracer) gateOn() bool { return gateAsked(t.opts) }

func gateAsked(opts Options) bool {
	return opts.HealthyCount && (opts.Filter == nil || len(opts.Filter.Insns) == 0)
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
	gateEndedThenTrouble
	gateStats
)

// Gate reads the gate's counters, summed over CPUs: all zero while it is off.
func (t *Tracer) Gate() (event.GateCounts, error) {
	var g event.GateCounts
	if !t.gateOn() {
		return g, nil
	}
	for stat, to := range map[uint32]*uint64{gateHeld: &g.Held, gateReleased: &g.Released, gateHealthy: &g.Healthy,
		gateDiscarded: &g.Discarded, gateTriggered: &g.Triggered, gateMissing: &g.Missing, gateEndedThenTrouble: &g.EndedThenTrouble} {
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

// GateRefused says why the gate asked for does not run: this kernel's
// verifier refused its programs. Nil when it runs, or was not asked for.
func (t *Tracer) GateRefused() error { return t.gateRefused }

// reopenWithoutGate opens the points again without the gate when the
// verifier refused some gated program (gated is that attempt, and err its
// failure if nothing attached), and keeps whichever attempt observes more:
// the gate's functions are BPF subprograms, and verifiers before Linux
// 6.12 (measured on 6.1) count a call's stack on top of its caller's 496
// bytes and refuse every program with a call ("combined stack size ...
// Too large"). Recording every connection is the mode the gate only
// makes cheaper: no finding is lost, the cost is said. The gated attempt
// is closed first: the kernel allows one BPF program per netfilter hook
// and priority, so the plain attempt's links would otherwise move away
// from their places by the NAT (netfilter.go, linkAt). Where the plain
// attempt observes no more, the gate was not what the kernel refused,
// and it is opened again.
func reopenWithoutGate(gated *Tracer, err error, opts Options, facts kernel.Facts, syms *kernel.Symbols) (*Tracer, error) {
	reason, gatedPoints := "no point attached with it", 0
	if gated != nil {
		reason, gatedPoints = gated.verifierRefusal, gated.activePoints()
		gated.Close()
	} else if err != nil {
		reason = err.Error()
	}
	plain := opts
	plain.HealthyCount = false
	t, perr := open(plain, facts, syms)
	if perr == nil && t.activePoints() > gatedPoints {
		t.gateRefused = fmt.Errorf("this kernel's verifier refused the gate's programs (%s); every connection is recorded, as with --healthy ship", reason)
		return t, nil
	}
	if t != nil {
		t.Close()
	}
	if gated == nil {
		return nil, err
	}
	return open(opts, facts, syms)
}
