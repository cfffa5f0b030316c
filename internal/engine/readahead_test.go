package engine

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// recordIncidents writes a recording of incidentStream(conns), every
// event carrying packet bytes of its own, with a tick (its number) after
// every 100th event, at the end of every batch ReadAhead reads, after the
// last and before the first (the tick after n events carries n+1), and a
// loss window after every 150th (one record lost, counted through n), and
// returns it with its events.
func recordIncidents(t *testing.T, conns int) (string, []event.Event) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "incidents.ntrace")
	meta := trace.Meta{Nettrace: "test", SnapLen: 128, DropReasons: fixture.ReasonNames, Ticks: true, LossMarks: true}
	w, err := trace.Create(path, meta, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	events := incidentStream(conns)
	if err := w.Tick(1); err != nil {
		t.Fatal(err)
	}
	for i := range events {
		events[i].Packet = []byte{0x45, byte(i), byte(i >> 8), byte(i >> 16)}
		if err := w.Event(&events[i]); err != nil {
			t.Fatal(err)
		}
		if tickAfter(i+1, len(events)) {
			if err := w.Tick(uint64(i + 2)); err != nil {
				t.Fatal(err)
			}
		}
		if (i+1)%lossEvery == 0 {
			if err := w.Losses(event.LossWindow{From: uint64(i), To: uint64(i + 1), N: 1}, uint64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(trace.Summary{}); err != nil {
		t.Fatal(err)
	}
	return path, events
}

// lossEvery is how many events recordIncidents writes between loss windows.
const lossEvery = 150

// tickAfter says whether recordIncidents ticks after the n-th of all events
// (before the first: n is 0).
func tickAfter(n, all int) bool { return n%100 == 0 || n%readBatch == 0 || n == all }

// The events come in order with their bytes, across batches, and the
// ticks and loss counts in their places among them, however far the
// reader has read ahead.
func TestReadAheadYieldsEveryEventInOrder(t *testing.T) {
	path, want := recordIncidents(t, 40) // several batches and a partial one
	s, _, closeAll, err := OpenRecordings([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	n, ticks := 0, 0
	tick := func(at uint64) {
		if at != uint64(n+1) || !tickAfter(n, len(want)) {
			t.Fatalf("tick %d after %d events", at, n)
		}
		ticks++
	}
	losses := 0
	loss := func(win event.LossWindow, through uint64) {
		if win.N == 0 {
			return // how far the losses are counted, the end's or before the first event
		}
		if (win.To != uint64(n) || through != uint64(n)) && losses == 0 {
			// Errorf, not Fatalf: told out of place, it is told on the
			// reader's goroutine.
			t.Errorf("losses counted through %d (window to %d) told after %d events", through, win.To, n)
		}
		losses++
	}
	for e := range ReadAhead(s, StreamMarks{Tick: tick, Loss: loss}) {
		if n >= len(want) {
			t.Fatalf("more than the %d events recorded", len(want))
		}
		if e.Time != want[n].Time || e.Skb != want[n].Skb || !bytes.Equal(e.Packet, want[n].Packet) {
			t.Fatalf("event %d: time %d skb %#x packet % x, recorded time %d skb %#x packet % x",
				n, e.Time, e.Skb, e.Packet, want[n].Time, want[n].Skb, want[n].Packet)
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("%d events read, %d recorded", n, len(want))
	}
	wantTicks := 1
	for i := range want {
		if tickAfter(i+1, len(want)) {
			wantTicks++
		}
	}
	if ticks != wantTicks {
		t.Fatalf("%d ticks, %d recorded", ticks, wantTicks)
	}
	if losses != len(want)/lossEvery && !t.Failed() {
		t.Fatalf("%d loss windows told, %d recorded", losses, len(want)/lossEvery)
	}
	if len(s.Errs) != 0 {
		t.Fatalf("stream errors: %v", s.Errs)
	}
}

// TestReadAheadStopsWithTheLoop: leaving the loop early stops the reader
// before the stream is the caller's again (closing the files then races
// with nothing).
func TestReadAheadStopsWithTheLoop(t *testing.T) {
	path, want := recordIncidents(t, 40)
	for _, stopAt := range []int{0, readBatch - 1, readBatch, 3*readBatch + 7, len(want) - 1} {
		s, _, closeAll, err := OpenRecordings([]string{path})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for range ReadAhead(s, StreamMarks{}) {
			if n == stopAt {
				break
			}
			n++
		}
		closeAll()
		if n != stopAt {
			t.Errorf("stopped at %d, want %d", n, stopAt)
		}
	}
}
