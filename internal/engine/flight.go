package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// FlightOptions say what a flight recorder keeps.
type FlightOptions struct {
	// Dir is where windows are written; a finding's window is the events
	// Before its flow began to After it ended; Keep bounds the files kept.
	Dir           string
	Before, After time.Duration
	Keep          int
	// Span is how long events are held: a flow's events must still be
	// there when its finding comes, after it ended and went idle.
	Span time.Duration
	// Settle is how long a window waits, past its end, before it is
	// written: a finding comes a flow timeout after its flow's end, and
	// one whose window overlaps this one (its flow began up to `before`
	// past this window's end) then joins it rather than making a file of
	// its own.
	Settle time.Duration
	// MaxBytes bounds the memory the held events take.
	MaxBytes int
	// Written is told of each file written, with the flows of the
	// findings it holds; on the writing goroutine.
	Written func(path string, flows []uint64)
}

// flightFinding is a finding the pipeline reports, for the flight
// recorder: its flow's first and last event times.
type flightFinding struct {
	rule       string
	finding    *explain.Finding
	flow       uint64
	start, end uint64
}

// heldEvent is an event in the flight recorder's window, encoded.
type heldEvent struct {
	time uint64
	rec  []byte
}

// flightDump is a window being written: its events, and the file.
type flightDump struct {
	first      flightFinding
	flows      []uint64 // of the findings it holds
	from, till uint64
}

// FlightRecorder keeps the last events in memory and, when a finding
// comes, writes the window around its flow (from `before` ahead of its
// first event to `after` past its last) to a file of its own named after
// the finding, so that a run of days keeps each failure with its context
// and nothing else. Findings whose windows overlap share one file. It runs
// on the event goroutine; the files are written on another.
type FlightRecorder struct {
	o     FlightOptions
	meta  trace.Meta
	names trace.Namer
	// held are the events in the window from head on: the ones before
	// are let go, and the slice is compacted once they are half of it.
	held     []heldEvent
	head     int
	heldSize int
	rulesets []ruleset.Snapshot
	found    chan flightFinding
	pending  []flightDump
	// writing lets one file be written at a time, and carries the files
	// kept.
	writing chan []string
	problem func(error)
	scratch []byte
}

func NewFlightRecorder(o FlightOptions, meta trace.Meta, names trace.Namer, problem func(error)) (*FlightRecorder, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("flight recorder: %w", err)
	}
	f := &FlightRecorder{o: o, meta: meta, names: names, found: make(chan flightFinding, 1024), writing: make(chan []string, 1),
		problem: problem, scratch: make([]byte, event.RecordSize+event.MaxIPv6Block+256)}
	f.writing <- nil
	return f, nil
}

// finding is told of a finding; safe from any goroutine. A finding that
// does not fit the queue is a burst of them, whose windows overlap the
// ones queued.
func (f *FlightRecorder) finding(x flightFinding) {
	select {
	case f.found <- x:
	default:
	}
}

// event holds an event, and lets go of the oldest past the span or the
// memory bound.
func (f *FlightRecorder) event(e *event.Event) {
	need := event.RecordSize + event.MaxIPv6Block + len(e.Packet)
	if len(f.scratch) < need {
		f.scratch = make([]byte, need)
	}
	n := event.Encode(e, f.scratch)
	f.held = append(f.held, heldEvent{time: e.Time, rec: append([]byte(nil), f.scratch[:n]...)})
	f.heldSize += n
	for f.head < len(f.held) && (f.held[f.head].time+uint64(f.o.Span) < e.Time || f.heldSize > f.o.MaxBytes) {
		f.heldSize -= len(f.held[f.head].rec)
		f.held[f.head] = heldEvent{}
		f.head++
	}
	if f.head > 1024 && f.head > len(f.held)/2 {
		f.held = append(f.held[:0], f.held[f.head:]...)
		f.head = 0
	}
}

func (f *FlightRecorder) ruleset(s ruleset.Snapshot) { f.rulesets = append(f.rulesets, s) }

// tick takes the findings, and writes the windows whose end has passed
// (now is the newest event time; final: the run ends, write them all).
func (f *FlightRecorder) tick(now uint64, final bool) {
	for more := true; more; {
		select {
		case x := <-f.found:
			f.add(x)
		default:
			more = false
		}
	}
	for len(f.pending) > 0 && (final || f.pending[0].till+uint64(f.o.Settle) <= now) {
		f.dump(f.pending[0])
		f.pending = f.pending[1:]
	}
}

// close writes the windows still open and waits for the files; it
// returns the files kept.
func (f *FlightRecorder) close() []string {
	f.tick(0, true)
	files := <-f.writing
	f.writing <- files
	return files
}

// add opens a window for a finding, or widens the one it overlaps.
func (f *FlightRecorder) add(x flightFinding) {
	from, till := x.start-min(x.start, uint64(f.o.Before)), x.end+uint64(f.o.After)
	for i := range f.pending {
		if p := &f.pending[i]; from <= p.till && till >= p.from {
			p.from, p.till = min(p.from, from), max(p.till, till)
			p.flows = append(p.flows, x.flow)
			return
		}
	}
	f.pending = append(f.pending, flightDump{first: x, flows: []uint64{x.flow}, from: from, till: till})
}

// dump hands a window's events to the writing goroutine.
func (f *FlightRecorder) dump(d flightDump) {
	var evs [][]byte
	for _, h := range f.held[f.head:] {
		if h.time >= d.from && h.time <= d.till {
			evs = append(evs, h.rec)
		}
	}
	var rs []ruleset.Snapshot
	for _, s := range f.rulesets {
		if s.Time <= d.till {
			rs = append(rs, s)
		}
	}
	at := f.meta.Wall(d.first.start)
	name := fmt.Sprintf("%s-%s-flow%d.ntrace", d.first.rule, at.Format("20060102-150405.000"), d.first.flow)
	path := filepath.Join(f.o.Dir, strings.ReplaceAll(name, "/", "-"))
	files := <-f.writing
	go func() {
		if err := f.write(path, evs, rs); err != nil {
			f.problem(err)
		} else {
			files = append(files, path)
			for f.o.Keep > 0 && len(files) > f.o.Keep {
				os.Remove(files[0])
				files = files[1:]
			}
			if f.o.Written != nil {
				f.o.Written(path, d.flows)
			}
		}
		f.writing <- files
	}()
}

// write writes a window's file whole: to a file beside it, renamed into
// place once complete, so that DIR only ever holds whole windows (a reader
// of DIR, a full disk, a kill midway).
func (f *FlightRecorder) write(path string, evs [][]byte, rs []ruleset.Snapshot) error {
	partial := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
	err := f.writeWindow(partial, evs, rs)
	if err == nil {
		err = os.Rename(partial, path)
	}
	if err != nil {
		os.Remove(partial)
	}
	return err
}

func (f *FlightRecorder) writeWindow(path string, evs [][]byte, rs []ruleset.Snapshot) error {
	w, err := trace.Create(path, f.meta, f.names)
	if err != nil {
		return err
	}
	for _, s := range rs {
		if err := w.Ruleset(s); err != nil {
			w.Close(trace.Summary{})
			return err
		}
	}
	var e event.Event
	for _, rec := range evs {
		if err := event.Decode(rec, &e); err != nil {
			w.Close(trace.Summary{})
			return err
		}
		if err := w.Event(&e); err != nil {
			w.Close(trace.Summary{})
			return err
		}
	}
	return w.Close(trace.Summary{Ended: time.Now().UTC()})
}
