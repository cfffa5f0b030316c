package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// journeyFlushProgram sends a CPU's pending packet journey (struct
// nt_journey): the points hold a packet's record while its next steps on
// that CPU join it, and a CPU gone quiet would hold its last one until its
// next event.
const journeyFlushProgram = "journey_flush"

// loadJourneyFlush loads the flush program. It is run, never attached:
// nothing of it outlives the process.
func (t *Tracer) loadJourneyFlush() error {
	load := loadJourney
	if t.gateOn() {
		load = loadJourneyGate
	}
	spec, err := load()
	if err != nil {
		return fmt.Errorf("load BPF object: %w", err)
	}
	if err := t.configure(spec); err != nil {
		return err
	}
	coll, err := t.newCollection(spec)
	if err != nil {
		return fmt.Errorf("load %s: %w", journeyFlushProgram, err)
	}
	t.colls = append(t.colls, coll)
	t.journeyFlush = coll.Programs[journeyFlushProgram]
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("count CPUs: %w", err)
	}
	t.cpus = cpus
	return nil
}

// Flush sends the packet journeys the kernel holds on every CPU, so that
// every record made before it is in the ring buffer or counted lost. The
// reader calls it before counting losses and before its last drain.
func (t *Tracer) Flush() error {
	if t.journeyFlush == nil {
		return nil
	}
	for cpu := range t.cpus {
		if err := t.flushCPU(cpu); err != nil {
			return err
		}
	}
	return nil
}

// flushBusyTries bounds the runs on a CPU whose journey a program was
// changing when the flush interrupted it: that program is done within
// microseconds, well before the next run.
const flushBusyTries = 1000

func (t *Tracer) flushCPU(cpu int) error {
	for range flushBusyTries {
		busy, err := t.journeyFlush.Run(&ebpf.RunOptions{CPU: uint32(cpu), Flags: unix.BPF_F_TEST_RUN_ON_CPU})
		switch {
		case errors.Is(err, unix.ENXIO):
			return nil // an offline CPU holds no journey
		case err != nil:
			return fmt.Errorf("flush packet journeys on CPU %d: %w", cpu, err)
		case busy == 0:
			return nil
		}
	}
	return fmt.Errorf("flush packet journeys on CPU %d: busy %d times in a row", cpu, flushBusyTries)
}
