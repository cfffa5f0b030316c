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
// stream's ticks among them.
type eventBatch struct {
	events  []event.Event
	packets []byte
	ticks   []batchTick
	last    bool // the stream ended after these
}

// batchTick is a tick of the stream, before the batch's event at index
// before (after the last event when it is len(events)).
type batchTick struct {
	before int
	at     uint64
}

// ReadAhead yields the events of a stream in order, read and decoded on
// another goroutine. An event is valid until the loop body returns. The
// stream's ticks (trace.Stream.Ticks), when tick is not nil, go to tick in
// their place among the events, on the loop's goroutine. Once the loop is
// over, the stream is the caller's again (its reader has stopped).
func ReadAhead(s *trace.Stream, tick func(at uint64)) iter.Seq[*event.Event] {
	return func(yield func(*event.Event) bool) {
		full, free := make(chan *eventBatch, readBatches), make(chan *eventBatch, readBatches)
		for range readBatches {
			free <- &eventBatch{events: make([]event.Event, 0, readBatch)}
		}
		var filling *eventBatch
		if tick != nil {
			s.OnTick(func(at uint64) {
				filling.ticks = append(filling.ticks, batchTick{before: len(filling.events) - 1, at: at})
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
			ticks := b.ticks
			for i := range b.events {
				for ; len(ticks) > 0 && ticks[0].before == i; ticks = ticks[1:] {
					tick(ticks[0].at)
				}
				if !yield(&b.events[i]) {
					free <- b // the reader may be waiting for a batch to fill
					return
				}
			}
			for _, t := range ticks {
				tick(t.at)
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
	b.events, b.packets, b.ticks = b.events[:0], b.packets[:0], b.ticks[:0]
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
