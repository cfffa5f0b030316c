package engine

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// renderStage explains and renders finished flows on goroutines of their
// own, one per core, and hands them on to be written in the order they
// ended, on one more: correlation keeps its core to itself, and a
// recording whose flows all end at once (at its end) is explained on every
// core.
type renderStage struct {
	explain func(*flow.Flow) *explain.Report
	corr    *flow.Correlator // takes each flow back once it is rendered
	write   func(renderedFlow)
	// ended carries finished flows, numbered, to the goroutines that
	// explain and render them; rendered carries them on to the one that
	// writes them, which closes written when it is done.
	ended    chan endedFlow
	rendered chan renderedFlow
	written  chan struct{}
	endedN   uint64
	// rooms (for decoded events) and texts (for rendered flows) are the
	// buffers not in use by a flow in flight.
	rooms pool[[]event.Event]
	texts pool[[]byte]
	// flowsWritten of the flows handed on have been written, the last
	// one handed on at kernel time lastWrittenAt (findingsThrough).
	flowsWritten  atomic.Uint64
	lastWrittenAt atomic.Uint64
}

// endedFlow is a finished flow on its way to be explained: the n-th to end.
type endedFlow struct {
	n, at uint64 // at: the pipeline's kernel time when it ended
	f     *flow.Flow
}

// renderedFlow is what is left to do of the n-th flow to end: count its
// finding and write its text.
type renderedFlow struct {
	n, at   uint64
	rule    string           // of its finding; "" for none
	finding *explain.Finding // nil for none
	text    []byte           // nil when not shown
	outcome string           // where it ended (output.Outcome)
	// what the flight recorder needs of a flow with a finding
	id, start, end uint64
}

// flowRenderer renders a finished flow with its report, or nothing when
// the flow is not shown.
type flowRenderer interface {
	AppendFlow(b []byte, f *flow.Flow, r *explain.Report) []byte
}

// endedBacklog bounds the flows waiting to be explained, and again to be
// shown: past it correlation waits, so that memory stays bounded when
// output is slow.
const endedBacklog = 256

// maxKeptText bounds the rendered flows kept for reuse: one huge flow
// must not hold its buffer for the rest of the run.
const maxKeptText = 64 << 10

// startRenderStage starts the goroutines that explain (with explain) and
// render (with a renderer each, unless renderer is nil) the flows as they
// end, and the one that gives them to write in order.
func startRenderStage(renderer func() flowRenderer, explain func(*flow.Flow) *explain.Report, corr *flow.Correlator,
	write func(renderedFlow)) *renderStage {
	workers := runtime.GOMAXPROCS(0)
	s := &renderStage{explain: explain, corr: corr, write: write,
		ended: make(chan endedFlow, endedBacklog), rendered: make(chan renderedFlow, endedBacklog), written: make(chan struct{}),
		rooms: make(pool[[]event.Event], workers), texts: make(pool[[]byte], 2*endedBacklog+workers)}
	var rendering sync.WaitGroup
	for range workers {
		var own flowRenderer
		if renderer != nil {
			own = renderer()
		}
		rendering.Go(func() { s.render(own) })
	}
	go func() {
		rendering.Wait()
		close(s.rendered)
	}()
	go s.writeInOrder()
	return s
}

// hand gives the stage a finished flow, ended at the pipeline's kernel
// time at.
func (s *renderStage) hand(f *flow.Flow, at uint64) {
	s.ended <- endedFlow{n: s.endedN, at: at, f: f}
	s.endedN++
}

// close waits for every flow handed over to be written.
func (s *renderStage) close() {
	close(s.ended)
	<-s.written
}

// render decodes, explains and renders (with r, unless nil) the flows
// handed over, and gives them back to the correlator.
func (s *renderStage) render(r flowRenderer) {
	for x := range s.ended {
		room := x.f.Decode(s.rooms.get())
		y := renderedFlow{n: x.n, at: x.at, id: x.f.ID, start: x.f.Start, end: x.f.End}
		report := s.explain(x.f)
		y.rule, y.finding = report.Rule(), report.Found()
		if report != nil {
			y.outcome = output.Outcome(report)
		}
		if r != nil && report != nil {
			y.text = r.AppendFlow(s.texts.get()[:0], x.f, report)
		}
		s.corr.Release(x.f)
		s.rooms.put(room)
		s.rendered <- y
	}
}

// writeInOrder writes the rendered flows in the order they ended, and
// keeps their buffers for the next.
func (s *renderStage) writeInOrder() {
	defer close(s.written)
	inOrder(s.rendered, func(y renderedFlow) uint64 { return y.n }, func(y renderedFlow) {
		s.write(y)
		s.lastWrittenAt.Store(y.at)
		s.flowsWritten.Add(1)
		if y.text != nil && cap(y.text) <= maxKeptText {
			s.texts.put(y.text)
		}
	})
}

// findingsThrough is the kernel time through which every finding of the
// flows ended by now has been written: now itself unless flows are still
// being explained, else just before the time the last flow written was
// handed over at (flows handed over at that same time may still be on
// their way).
func (s *renderStage) findingsThrough(now uint64) uint64 {
	if s.flowsWritten.Load() == s.endedN {
		return now
	}
	return min(now, max(s.lastWrittenAt.Load(), 1)-1)
}

// inOrder calls each for the items from in in the order of their numbers
// (0, 1, 2, ...), though goroutines working side by side finish them out
// of order: the ones that come early wait, bounded by the items in flight.
func inOrder[T any](in <-chan T, number func(T) uint64, each func(T)) {
	early := map[uint64]T{}
	var next uint64
	for x := range in {
		early[number(x)] = x
		for y, ok := early[next]; ok; y, ok = early[next] {
			delete(early, next)
			next++
			each(y)
		}
	}
}

// pool is a bounded free list goroutines share: what does not fit is let
// go.
type pool[T any] chan T

func (p pool[T]) get() (v T) {
	select {
	case v = <-p:
	default:
	}
	return v
}

func (p pool[T]) put(v T) {
	select {
	case p <- v:
	default:
	}
}
