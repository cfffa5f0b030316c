package engine

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// TestReplayEndsFlowsWhereTheRunDid: a packet's last step comes after the
// next connections moved the clock past its flow's idle time, as when an
// idle CPU held it. The run ended the flow at a tick before the step came,
// and the step made a flow of its own. Replay, told where the run's ticks
// fell, shows the run's flows byte for byte; without them (a recording
// made before ticks were recorded) it ends flows elsewhere, and the step
// joins its flow.
func TestReplayEndsFlowsWhereTheRunDid(t *testing.T) {
	const second = 1_000_000_000
	conn := fixture.SNATMissing(false)
	var events []event.Event
	for c := range 4 {
		for _, e := range conn {
			fixture.Repeat(&e, c, 3*second)
			events = append(events, e)
		}
	}
	n := len(conn)
	events = slices.Concat(events[:n-1], events[n:3*n], events[n-1:n], events[3*n:])
	for _, ticks := range []bool{true, false} {
		live, replayed := replayAfterRun(t, events, ticks)
		if same := bytes.Equal(replayed, live); same != ticks {
			t.Errorf("ticks recorded %v: replay shows the run's flows %v, want %v\nrun:\n%s\nreplay:\n%s", ticks, same, ticks, live, replayed)
		}
	}
}

// replayAfterRun runs events through a pipeline as the live loop does,
// ticking every 100 ms of kernel time, records them (with the ticks when
// ticks is true), and returns what the run and the replay of its
// recording showed.
func replayAfterRun(t *testing.T, events []event.Event, ticks bool) (live, replayed []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.ntrace")
	meta := trace.Meta{Nettrace: "test", SnapLen: 128, DropReasons: fixture.ReasonNames, Ticks: ticks,
		WallNS: 1_700_000_000_000_000_000}
	rec, err := trace.NewRecorder(path, meta, fixture.Context{}, trace.RecordOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName,
		Netns: fixture.Context{}.NetnsName, Wall: meta.Wall}
	sources := explain.Sources{Names: names, Pods: fixture.Context{}.PodAddresses}
	var run bytes.Buffer
	p := New(Options{Format: "text", Timelines: output.TimelinesAll, Names: names, Sources: sources, Stdout: &run, Recorder: rec})
	const tick = 100_000_000
	var now uint64
	for i := range events {
		p.Event(&events[i])
		if events[i].Time >= now+tick {
			now = events[i].Time
			p.Tick(now)
		}
	}
	p.Finish(nil, nil, 0)
	if _, err := rec.Close(trace.Summary{}); err != nil {
		t.Fatal(err)
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	s, _, closeAll, err := OpenRecordings([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	all, err := filter.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	var replay bytes.Buffer
	if err := Replay(s, all, Options{Format: "text", Timelines: output.TimelinesAll, Stdout: &replay}); err != nil {
		t.Fatal(err)
	}
	return run.Bytes(), replay.Bytes()
}
