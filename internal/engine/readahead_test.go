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
// event carrying packet bytes of its own, and returns it with its events.
func recordIncidents(t *testing.T, conns int) (string, []event.Event) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "incidents.ntrace")
	w, err := trace.Create(path, trace.Meta{Nettrace: "test", SnapLen: 128, DropReasons: fixture.ReasonNames}, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	events := incidentStream(conns)
	for i := range events {
		events[i].Packet = []byte{0x45, byte(i), byte(i >> 8), byte(i >> 16)}
		if err := w.Event(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(trace.Summary{}); err != nil {
		t.Fatal(err)
	}
	return path, events
}

func TestReadAheadYieldsEveryEventInOrder(t *testing.T) {
	path, want := recordIncidents(t, 40) // several batches and a partial one
	s, _, closeAll, err := OpenRecordings([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	n := 0
	for e := range ReadAhead(s) {
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
		for range ReadAhead(s) {
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
