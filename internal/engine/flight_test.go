package engine

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// The flight recorder keeps a file per failure window, named after its
// finding, holding the failed flow's events and what came before and
// after within the window; healthy traffic alone keeps nothing; --keep
// bounds the files.
func TestFlightRecorder(t *testing.T) {
	const spacing = 2_000_000_000 // 2 s between connections
	stream := func(faulty ...int) []event.Event {
		var out []event.Event
		for c := 0; c < 40; c++ {
			seq := fixture.SNATMissing(true)
			for _, f := range faulty {
				if c == f {
					seq = fixture.SNATMissing(false)
				}
			}
			for _, e := range seq {
				fixture.Repeat(&e, c, spacing)
				out = append(out, e)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		faulty []int
		keep   int
		files  int
	}{
		{"healthy", nil, 10, 0},
		{"one failure", []int{30}, 10, 1},
		{"two failures far apart, one kept", []int{5, 30}, 1, 1},
		{"two failures in one window", []int{30, 31}, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
			o := FlightOptions{Dir: dir, Before: time.Second, After: time.Second, Keep: tc.keep,
				Settle: 5 * time.Second, Span: 2 * time.Minute, MaxBytes: 64 << 20}
			var problem error
			f, err := NewFlightRecorder(o, trace.Meta{Nettrace: "test", DropReasons: fixture.ReasonNames}, explain.Sources{Names: names}, func(err error) { problem = err })
			if err != nil {
				t.Fatal(err)
			}
			// JSON with its events explains each flow as it ends, in
			// order with the events: findings come at their time.
			p := New(Options{Format: "json", Stdout: io.Discard, Names: names, Flight: f})
			events := stream(tc.faulty...)
			for i := range events {
				p.Event(&events[i])
				if i%8 == 0 {
					p.Tick(events[i].Time)
				}
			}
			p.Finish(nil, nil, 0)
			if problem != nil {
				t.Fatal(problem)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			if len(files) != tc.files || len(p.flightKept) != tc.files {
				t.Fatalf("files %v (kept %v), want %d", files, p.flightKept, tc.files)
			}
			for _, file := range files {
				if !strings.HasPrefix(filepath.Base(file), "snat-missing-on-tunnel-") {
					t.Errorf("%s is not named after its finding", file)
				}
				r, err := trace.Open(file)
				if err != nil {
					t.Fatal(err)
				}
				var e event.Event
				n, faulty := 0, uint64(0)
				for ; ; n++ {
					err := r.Next(&e)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if e.Point == event.PointDrop {
						faulty++
					}
				}
				r.Close()
				// The window: the failed connection, and its neighbours
				// within a second before and after; not all 40.
				if faulty == 0 || n == 0 || n >= len(events)/4 {
					t.Errorf("%s: %d events, %d drops", file, n, faulty)
				}
			}
			os.RemoveAll(dir)
		})
	}
}
