package engine

import (
	"sync/atomic"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// lossWait holds finished flows back until every loss that could have
// touched them is counted, and marks those that lost records incomplete:
// a finding never rests on a record that may be missing.
type lossWait struct {
	losses     *flow.Losses
	unsure     []*flow.Flow  // waiting, in the order they ended
	incomplete atomic.Uint64 // flows that lacked records; read by the metrics' goroutine
	// recorded is when a loss count last went to the recording.
	recorded time.Time
}

// hold keeps a finished flow waiting while a loss that could have touched
// it may still be uncounted, or a flow ended before it waits. A flow whose
// memory the correlator takes back after the call (clone) waits as a copy.
func (w *lossWait) hold(f *flow.Flow, clone bool) bool {
	if len(w.unsure) == 0 && w.losses.Known(f.Ended) {
		return false
	}
	if clone {
		f = f.Clone()
	}
	w.unsure = append(w.unsure, f)
	return true
}

// release passes on the waiting flows whose losses are all counted.
func (w *lossWait) release(deliver func(*flow.Flow)) {
	n := 0
	for ; n < len(w.unsure) && w.losses.Known(w.unsure[n].Ended); n++ {
		deliver(w.unsure[n])
		w.unsure[n] = nil
	}
	w.unsure = append(w.unsure[:0], w.unsure[n:]...)
}

// mark counts the records lost while a flow with packets was open
// (flow.Flow.LostAround).
func (w *lossWait) mark(f *flow.Flow) {
	if len(f.Packets) == 0 {
		return
	}
	if f.LostAround = w.losses.Around(f); f.LostAround > 0 {
		w.incomplete.Add(1)
	}
}

// recordDue says whether a loss count goes to the recording: when records
// were lost, and at least once a second otherwise.
func (w *lossWait) recordDue(lost bool) bool {
	if !lost && time.Since(w.recorded) < time.Second {
		return false
	}
	w.recorded = time.Now()
	return true
}
