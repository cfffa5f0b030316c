package trace

import (
	"bytes"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

type lossSeen struct {
	win     event.LossWindow
	through uint64
}

// Loss records replay as the run counted them, in their place among the
// events, and a recording's end counts every loss; with several
// recordings, losses are counted only as far as in all of them.
func TestLossesReplayAsCounted(t *testing.T) {
	write := func(host string, counts []lossSeen) string {
		path := filepath.Join(t.TempDir(), host+".ntrace")
		w, err := Create(path, Meta{Nettrace: "test", Host: host, LossMarks: true, WallNS: 1_000_000, MonoNS: 1_000}, fixture.Context{})
		if err != nil {
			t.Fatal(err)
		}
		evs := fixture.SNATMissing(false)
		for i, c := range counts {
			if err := w.Event(&evs[i]); err != nil {
				t.Fatal(err)
			}
			if err := w.Losses(c.win, c.through); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(Summary{Lost: map[string]uint64{"dev": 5}, Shed: map[string]uint64{"dev": 3}}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	counts := []lossSeen{{event.LossWindow{From: 0, To: 100, N: 2}, 50}, {event.LossWindow{From: 50, To: 200}, 150},
		{event.LossWindow{From: 150, To: 300, N: 6}, 250}}
	a := write("a", counts)
	b := write("b", counts[:1])

	s := open(t, a)
	var seen []lossSeen
	s.OnLoss(func(win event.LossWindow, through uint64) { seen = append(seen, lossSeen{win, through}) })
	readStream(t, s)
	// First how far losses are counted when it is set (nothing yet).
	want := append(append([]lossSeen{{}}, counts...), lossSeen{through: ^uint64(0)})
	if !s.CountsLosses() || !reflect.DeepEqual(seen, want) {
		t.Errorf("loss counts replayed %+v, want %+v", seen, want)
	}
	if s.Shed()[event.PointDev] != 3 || s.Lost()[event.PointDev] != 5 {
		t.Errorf("summary: lost %v, shed %v", s.Lost(), s.Shed())
	}

	s = open(t, a, b)
	var through []uint64
	s.OnLoss(func(_ event.LossWindow, t uint64) { through = append(through, t) })
	readStream(t, s)
	// Wall time: 1_000_000 + t - 1_000. While b is read, losses are
	// counted as far as b counted them (50), never as far as a did.
	bCounted := uint64(1_000_000 + 50 - 1_000)
	sawB := false
	for i, th := range through {
		sawB = sawB || th == bCounted
		if i > 0 && th < through[i-1] {
			t.Errorf("counted through less than before: %v", through)
		}
	}
	if !sawB || through[len(through)-1] != ^uint64(0) {
		t.Errorf("counted through %v: want b's count (%d) while it lasts, everything at the end", through, bCounted)
	}
}

func open(t *testing.T, paths ...string) *Stream {
	t.Helper()
	var rs []*Reader
	for _, p := range paths {
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		rs = append(rs, r)
	}
	return NewStream(rs)
}

func readStream(t *testing.T, s *Stream) {
	t.Helper()
	for {
		var e event.Event
		if err := s.Next(&e); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// A recording's ticks come to OnTick in their places among its events
// (during the Next that returns the event after each), never to OnLoss; a
// reader that knows only loss records reads a tick as an empty one. Merged
// recordings have no ticks of their own.
func TestTicksReadInTheirPlaces(t *testing.T) {
	if !bytes.HasPrefix(encodeTick(7), encodeLoss(event.LossWindow{}, 0)) {
		t.Fatalf("a tick record does not start as an empty loss record")
	}
	path := filepath.Join(t.TempDir(), "ticks.ntrace")
	w, err := Create(path, Meta{Nettrace: "test", LossMarks: true, Ticks: true}, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	evs := fixture.SNATMissing(false)[:4]
	loss := lossSeen{event.LossWindow{From: 1, To: 2, N: 3}, 2}
	if err := w.Tick(5); err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := w.Event(&evs[i]); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0, 2:
			err = w.Tick(uint64(10 * (i + 1)))
		case 1:
			err = w.Losses(loss.win, loss.through)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(Summary{}); err != nil {
		t.Fatal(err)
	}
	type tickSeen struct{ at, after uint64 }
	var ticks []tickSeen
	var losses []lossSeen
	returned := uint64(0)
	s := open(t, path)
	s.OnLoss(func(win event.LossWindow, through uint64) {
		if win.N > 0 {
			losses = append(losses, lossSeen{win, through})
		}
	})
	s.OnTick(func(at uint64) { ticks = append(ticks, tickSeen{at, returned}) })
	var e event.Event
	for s.Next(&e) == nil {
		returned++
	}
	if want := []tickSeen{{5, 0}, {10, 1}, {30, 3}}; !s.Ticks() || !reflect.DeepEqual(ticks, want) {
		t.Errorf("ticks %+v (stream has ticks: %v), want %+v", ticks, s.Ticks(), want)
	}
	if !reflect.DeepEqual(losses, []lossSeen{loss}) {
		t.Errorf("losses %+v, want %+v", losses, loss)
	}
	s = open(t, path, path)
	ticks = nil
	s.OnTick(func(at uint64) { ticks = append(ticks, tickSeen{at, 0}) })
	readStream(t, s)
	if s.Ticks() || len(ticks) != 0 {
		t.Errorf("two recordings merged: ticks %v (stream has ticks: %v), want none", ticks, s.Ticks())
	}
}
