package trace

import (
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
