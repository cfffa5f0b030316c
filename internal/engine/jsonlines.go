package engine

import (
	"encoding/json"
	"io"
	"runtime"
	"sync"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// jsonLines writes -o json --events: every event as it comes, every flow
// as it ends (as timelines asks), in that order. Converting and encoding an event costs more than reading
// and correlating it, so the caller's goroutine only copies events into
// batches; goroutines of their own (one per core) convert and encode the
// batches, and another writes them in order. Flows are converted in place,
// while their memory is the caller's, and encoded with their batch.
type jsonLines struct {
	names     output.Names
	timelines output.Timelines
	batch     *jsonBatch
	batches   uint64
	encode    chan *jsonBatch
	encoded   chan *jsonBatch
	free      pool[*jsonBatch]
	done      chan struct{}
	// err is the first error writing, the writer's until done.
	err error
}

// jsonBatch is a run of output lines in order: events (copied out of the
// reader's buffers) and objects already converted (flows, explanations,
// the summary), then, once encoded, their text.
type jsonBatch struct {
	n       uint64
	events  []event.Event
	packets []byte
	items   []jsonItem
	text    []byte
}

// jsonItem is one line of a batch: the event at index event (its packet
// the next packetLen bytes of the batch's packets), or obj.
type jsonItem struct {
	event     int
	packetLen int
	obj       any
}

// jsonBatchLines is how many lines a batch holds before it is encoded: a
// few per core keep every core busy without holding output back.
const jsonBatchLines = 512

func newJSONLines(w io.Writer, names output.Names, timelines output.Timelines) *jsonLines {
	workers := runtime.GOMAXPROCS(0)
	j := &jsonLines{names: names, timelines: timelines, encode: make(chan *jsonBatch, 2*workers), encoded: make(chan *jsonBatch, 2*workers),
		free: make(pool[*jsonBatch], 4*workers), done: make(chan struct{})}
	var encoding sync.WaitGroup
	for range workers {
		encoding.Go(j.encodeBatches)
	}
	go func() {
		encoding.Wait()
		close(j.encoded)
	}()
	go j.writeBatches(w)
	j.batch = j.newBatch()
	return j
}

func (j *jsonLines) newBatch() *jsonBatch {
	b := j.free.get()
	if b == nil {
		b = &jsonBatch{}
	}
	b.n, b.events, b.packets, b.items, b.text = j.batches, b.events[:0], b.packets[:0], b.items[:0], b.text[:0]
	j.batches++
	return b
}

// Event queues an event's line.
func (j *jsonLines) Event(e *event.Event) error {
	b := j.batch
	b.events = append(b.events, *e)
	// The packet bytes stay the reader's: keep where they start in the
	// batch's own copy, rebased onto it when the batch is encoded.
	b.events[len(b.events)-1].Packet = nil
	b.packets = append(b.packets, e.Packet...)
	b.items = append(b.items, jsonItem{event: len(b.events) - 1, packetLen: len(e.Packet)})
	j.full()
	return nil
}

// Flow queues a flow's line, and its finding's.
func (j *jsonLines) Flow(f *flow.Flow, r *explain.Report) error {
	for _, obj := range j.names.FlowObjects(f, r, j.timelines) {
		j.Raw(obj)
	}
	return nil
}

// Raw queues any other object (the summary) as a line.
func (j *jsonLines) Raw(v any) error {
	j.batch.items = append(j.batch.items, jsonItem{event: -1, obj: v})
	j.full()
	return nil
}

func (j *jsonLines) full() {
	if len(j.batch.items) >= jsonBatchLines {
		j.Flush()
	}
}

// Flush hands the lines queued so far on, to be written within moments.
func (j *jsonLines) Flush() {
	if len(j.batch.items) == 0 {
		return
	}
	j.encode <- j.batch
	j.batch = j.newBatch()
}

// Close writes every line queued and returns the first error writing.
func (j *jsonLines) Close() error {
	j.Flush()
	close(j.encode)
	<-j.done
	return j.err
}

func (j *jsonLines) encodeBatches() {
	for b := range j.encode {
		off := 0
		for _, it := range b.items {
			if it.event < 0 {
				// Marshal cannot fail on these: every field is a plain
				// value, a string, or a slice or map of them.
				line, _ := json.Marshal(it.obj)
				b.text = append(append(b.text, line...), '\n')
				continue
			}
			e := &b.events[it.event]
			n := it.packetLen
			e.Packet, off = b.packets[off:off+n:off+n], off+n
			b.text = append(j.names.AppendEvent(b.text, e), '\n')
		}
		j.encoded <- b
	}
}

// writeBatches writes the encoded batches in the order they were queued.
func (j *jsonLines) writeBatches(w io.Writer) {
	defer close(j.done)
	inOrder(j.encoded, func(b *jsonBatch) uint64 { return b.n }, func(b *jsonBatch) {
		if _, err := w.Write(b.text); err != nil && j.err == nil {
			j.err = err
		}
		j.free.put(b)
	})
}
