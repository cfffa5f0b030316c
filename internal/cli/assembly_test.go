package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/engine"
	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// writeTwoFlows records incident 1's failing connection and incident 2's
// healthy twin: a flow with a finding and one without.
func writeTwoFlows(t *testing.T, path string) {
	t.Helper()
	meta := trace.Meta{Nettrace: "test", Host: "node1", MonoNS: 1, WallNS: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).UnixNano(),
		DropReasons: fixture.ReasonNames}
	w, err := trace.Create(path, meta, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	failing, healthy := fixture.SNATMissing(false), fixture.SYNOverflow(true)
	for i := range healthy {
		healthy[i].Time += failing[len(failing)-1].Time + uint64(time.Second) // a connection after the first
	}
	for _, e := range append(failing, healthy...) {
		if err := w.Event(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(trace.Summary{}); err != nil {
		t.Fatal(err)
	}
}

// replayDirect is what engine.Replay writes on stdout for a recording with
// o and a filter: what the replay command must assemble from its flags.
func replayDirect(t *testing.T, path, expr string, o engine.Options) []byte {
	t.Helper()
	prog, err := filter.Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	s, _, closeAll, err := engine.OpenRecordings([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	var out bytes.Buffer
	o.Stdout, o.Summarize = &out, func(output.Summary) {}
	if o.FlowIdle == 0 {
		o.FlowIdle, o.MaxFlows, o.MaxPackets = flow.DefaultConfig.Idle, flow.DefaultConfig.MaxFlows, flow.DefaultConfig.MaxPackets
	}
	if err := engine.Replay(s, prog, o); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// The replay command assembles the engine as its flags say: for each
// combination, its output is the engine's with the options the flags
// mean; and each flag changes what is written, so that a flag lost on the
// way would fail.
func TestReplayAssembly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "two.ntrace")
	writeTwoFlows(t, path)
	seen := map[string]string{}
	for _, tc := range []struct {
		args   []string
		filter string
		o      engine.Options
	}{
		{nil, "", engine.Options{Format: "text", Timelines: output.TimelinesBrief}},
		{[]string{"--timelines", "findings"}, "", engine.Options{Format: "text", Timelines: output.TimelinesFindings}},
		{[]string{"--timelines", "all"}, "", engine.Options{Format: "text", Timelines: output.TimelinesAll}},
		{[]string{"--events"}, "", engine.Options{Format: "text", Timelines: output.TimelinesBrief, Events: true}},
		{[]string{"-o", "json"}, "", engine.Options{Format: "json", Timelines: output.TimelinesBrief}},
		{[]string{"-o", "json", "--timelines", "all"}, "", engine.Options{Format: "json", Timelines: output.TimelinesAll}},
		{[]string{"-o", "json", "--events"}, "", engine.Options{Format: "json", Timelines: output.TimelinesBrief, Events: true}},
		{[]string{"--timelines", "all"}, "port 30285", engine.Options{Format: "text", Timelines: output.TimelinesAll}},
		{[]string{"--max-packets", "1", "--timelines", "all"}, "", engine.Options{Format: "text", Timelines: output.TimelinesAll,
			FlowIdle: flow.DefaultConfig.Idle, MaxFlows: flow.DefaultConfig.MaxFlows, MaxPackets: 1}},
	} {
		args := append(append([]string{"replay"}, tc.args...), path)
		if tc.filter != "" {
			args = append(args, tc.filter)
		}
		r := nettrace(t, dir, nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.firstLine())
		}
		if want := replayDirect(t, path, tc.filter, tc.o); r.stdout != string(want) {
			t.Errorf("%v wrote\n%s\nwant what the engine writes with %+v:\n%s", args, r.stdout, tc.o, want)
		}
		if other, ok := seen[r.stdout]; ok {
			t.Errorf("%v wrote what %s wrote: a flag made no difference", args, other)
		}
		seen[r.stdout] = strings.Join(args, " ")
	}
}
