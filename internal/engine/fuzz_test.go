package engine

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// replayAllocBound is the most a replay may allocate for a recording of n
// bytes: room for the pipeline, and deflate's best ratio (about 1,000 to
// 1) on every byte, for rulesets that inflate as far as a file can make
// them. What the reader keeps is bounded by trace.MaxHeld besides.
func replayAllocBound(n int) uint64 { return 64<<20 + 2048*uint64(n) }

// FuzzReplay: whatever the bytes of a recording, a replay of it (the
// reader, the correlator, the rules and the text output) ends with an
// error or its flows, never panics, and allocates within a bound of the
// file's size.
func FuzzReplay(f *testing.F) {
	dir := f.TempDir()
	seed := func(name string, write func(w *trace.Writer)) {
		path := filepath.Join(dir, name)
		w, err := trace.Create(path, trace.Meta{Nettrace: "fuzz", WallNS: 1_700_000_000_000_000_000}, fixture.Context{})
		if err != nil {
			f.Fatal(err)
		}
		write(w)
		w.Close(trace.Summary{})
		b, _ := os.ReadFile(path)
		f.Add(b)
	}
	events := func(w *trace.Writer) {
		for _, e := range fixture.SNATMissing(false) {
			w.Event(&e)
		}
	}
	seed("incident1.ntrace", events)
	seed("ruleset.ntrace", func(w *trace.Writer) {
		w.Ruleset(ruleset.NewSnapshot(1, 0, "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -s 10.244.0.0/16 -j RETURN\nCOMMIT\n", "", ""))
		events(w)
	})
	// A ruleset of 4 MB in a few kilobytes.
	seed("inflating.ntrace", func(w *trace.Writer) {
		w.Ruleset(ruleset.Snapshot{Netns: 1, Text: strings.Repeat("-A KUBE-SERVICES -j RETURN\n", 150_000)})
		events(w)
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.ntrace")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		replayFile(t, path)
		runtime.ReadMemStats(&after)
		if got, bound := after.TotalAlloc-before.TotalAlloc, replayAllocBound(len(data)); got > bound {
			t.Fatalf("a replay of %d bytes allocated %d MiB, over its bound of %d MiB", len(data), got>>20, bound>>20)
		}
	})
}

// replayFile replays one recording to nowhere, as nettrace replay would.
func replayFile(t *testing.T, path string) {
	r, err := trace.Open(path)
	if err != nil {
		if _, ok := err.(*trace.Error); !ok {
			t.Fatalf("unlocated error %T: %v", err, err)
		}
		return
	}
	defer r.Close()
	s := trace.NewStream([]*trace.Reader{r})
	o := Options{Format: "text", Timelines: output.TimelinesAll, Stdout: io.Discard, Summarize: func(output.Summary) {}}
	prog, _ := filter.Compile("")
	if err := Replay(s, prog, o); err != nil {
		t.Fatal(err)
	}
}
