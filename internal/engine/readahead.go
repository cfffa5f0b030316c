package engine

import (
	"io"
	"iter"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// Replay reads recordings on a goroutine of its own, a batch of events at a
// time, so that reading and decoding them takes nothing from correlation's
// core.
const (
	readBatch   = 256 // events per batch
	readBatches = 4   // batches in flight: read ahead, being correlated, on their way back
)

// eventBatch is events read ahead, with their packet bytes, and the
// stream's marks among them.
type eventBatch struct {
	events  []event.Event
	packets []byte
	marks   []streamMark
	last    bool // the stream ended after these
}

// streamMark is what the stream said between two events, before the
// batch's event at index before (after the last event when it is
// len(events)): a tick, or how far its losses are counted.
type streamMark struct {
	before  int
	tick    bool
	at      uint64 // a tick's time
	win     event.LossWindow
	through uint64 // losses counted through
}

// StreamMarks are told what the stream says between its events, in their
// place among them, on the loop's goroutine; each may be nil.
type StreamMarks struct {
	// Tick is told of the stream's ticks (trace.Stream.Ticks).
	Tick func(at uint64)
	// Loss is told of its loss windows and how far its losses are counted
	// (trace.Stream.OnLoss): told in place, what it learns is what the
	// live run knew there, whatever the reader has read ahead.
	Loss func(win event.LossWindow, through uint64)
}

func (m StreamMarks) tell(x streamMark) {
	if x.tick {
		m.Tick(x.at)
	} else {
		m.Loss(x.win, x.through)
	}
}

// ReadAhead yields the events of a stream in order, read and decoded on
// another goroutine. An event is valid until the loop body returns. What
// the stream says between its events goes to marks in its place among the
// events. Once the loop is over, the stream is the caller's again (its
// reader has stopped).
func ReadAhead(s *trace.Stream, marks StreamMarks) iter.Seq[*event.Event] {
	return func(yield func(*event.Event) bool) {
		full, free := make(chan *eventBatch, readBatches), make(chan *eventBatch, readBatches)
		for range readBatches {
			free <- &eventBatch{events: make([]event.Event, 0, readBatch)}
		}
		var filling *eventBatch
		if marks.Tick != nil {
			s.OnTick(func(at uint64) {
				filling.marks = append(filling.marks, streamMark{before: len(filling.events) - 1, tick: true, at: at})
			})
		}
		if marks.Loss != nil {
			s.OnLoss(func(win event.LossWindow, through uint64) {
				if filling == nil {
					// Told at once, of what the stream knew before its
					// first event: on this goroutine.
					marks.Loss(win, through)
					return
				}
				filling.marks = append(filling.marks, streamMark{before: len(filling.events) - 1, win: win, through: through})
			})
		}
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				var b *eventBatch
				select {
				case b = <-free:
				case <-stop:
					return
				}
				filling = b
				b.fill(s)
				full <- b
				if b.last {
					return
				}
			}
		}()
		defer func() {
			close(stop)
			<-stopped
		}()
		for b := range full {
			pending := b.marks
			for i := range b.events {
				for ; len(pending) > 0 && pending[0].before == i; pending = pending[1:] {
					marks.tell(pending[0])
				}
				if !yield(&b.events[i]) {
					free <- b // the reader may be waiting for a batch to fill
					return
				}
			}
			for _, x := range pending {
				marks.tell(x)
			}
			if b.last {
				return
			}
			free <- b
		}
	}
}

// fill reads up to a batch of events, copying their packet bytes out of
// the reader's buffer (valid only until its next read).
func (b *eventBatch) fill(s *trace.Stream) {
	b.events, b.packets, b.marks = b.events[:0], b.packets[:0], b.marks[:0]
	var ends [readBatch]int
	for len(b.events) < readBatch {
		b.events = append(b.events, event.Event{})
		e := &b.events[len(b.events)-1]
		if err := s.Next(e); err == io.EOF {
			b.events, b.last = b.events[:len(b.events)-1], true
			break
		}
		b.packets = append(b.packets, e.Packet...)
		ends[len(b.events)-1] = len(b.packets)
	}
	start := 0
	for i := range b.events {
		if end := ends[i]; end > start {
			b.events[i].Packet = b.packets[start:end:end]
			start = end
		}
	}
}
