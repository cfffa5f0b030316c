package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// TestOneTimelineFromTwoRecorders: incident 1 recorded by two nettraces,
// one watching node 1 and its pod, the other the underlay, node 2 and its
// pod, as two nodes' DaemonSets would; replay of both recordings gives the
// connection one flow across the two (joined by the packets seen leaving
// one recording's namespaces and entering the other's), with the finding
// named once, and places their clocks (one kernel's here, so the bounds
// the packets give must hold the true offset, zero). The healthy twin
// gives no finding. The failing twin's recordings, replayed as one page, open in the
// browser with both nodes' namespaces on the flow's diagram
// (requirePageDrawsReport; NETTRACE_SCREENSHOTS keeps it as
// merged-two-nodes.png).
func TestOneTimelineFromTwoRecorders(t *testing.T) {
	b := startBrowser(t)
	twins(t, "snat-missing", func(t *testing.T, name string, healthy bool) {
		sc := upLab(t, name)
		dir := t.TempDir()
		halves := [][]string{{lab.NsNode1, "ntlab-p1"}, {lab.NsUnderlay, lab.NsNode2, "ntlab-p2"}}
		var recordings []string
		var watches []*watch
		for i, namespaces := range halves {
			rec := filepath.Join(dir, []string{"node1.ntrace", "node2.ntrace"}[i])
			args := []string{"-w", rec, "--node-name", nodeNames[i]}
			for _, ns := range namespaces {
				args = append(args, "--netns", ns)
			}
			recordings = append(recordings, rec)
			watches = append(watches, startWatch(t, args...))
		}
		outs, err := lab.Traffic(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			t.Log(o)
		}
		for _, w := range watches {
			w.stop(t)
		}
		merged, skewLog := replayMerged(t, recordings)
		t.Log(skewLog)
		var found []output.JSONExplanation
		for _, x := range merged.explanations {
			t.Logf("%s: %s", x.Rule, x.Summary)
			found = append(found, x)
		}
		if healthy {
			if len(found) != 0 {
				t.Fatalf("%d findings on the healthy twin", len(found))
			}
		} else {
			if len(found) != 1 || found[0].Rule != "snat-missing-on-tunnel" {
				t.Fatalf("findings %v, want snat-missing-on-tunnel once", found)
			}
		}
		requireFlowAcross(t, merged, healthy)
		requireAlignedWithinBounds(t, skewLog)
		requireClockSummarized(t, merged)
		requireCausalOrder(t, merged)
		if !healthy {
			dom := requirePageDrawsReport(t, b, recordings, "merged-two-nodes", true)
			for _, f := range dom.Flows {
				if f.Rule != "" && !slices.Equal(f.Hosts, nodeNames) {
					t.Errorf("flow %s's diagram groups its lifelines under %q, want %q", f.ID, f.Hosts, nodeNames)
				}
			}
		}
	})
}

// nodeNames are what the two recorders call their hosts (--node-name).
var nodeNames = []string{"node-1", "node-2"}

// replayMerged replays recordings together, and returns what replay
// logged of their clocks.
func replayMerged(t *testing.T, recordings []string) (trace, string) {
	t.Helper()
	cmd := exec.Command(nettraceBin, append([]string{"replay", "-o", "json", "--timelines", "all", "--log-format", "json"}, recordings...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	return parseTrace(t, stdout.Bytes()), stderr.String()
}

// requireFlowAcross requires a flow whose packets went through node 1's
// and node 2's namespaces, taken from both recordings, and, of the
// incident, that flow to hold the finding.
func requireFlowAcross(t *testing.T, tr trace, healthy bool) {
	t.Helper()
	for _, f := range tr.flows {
		seen := map[string]bool{}
		for _, p := range f.Packets {
			for _, s := range p.Steps {
				_, ns, _ := strings.Cut(s.Netns, ":")
				seen[ns] = true
			}
		}
		if seen[lab.NsNode1] && seen[lab.NsNode2] {
			if !healthy && f.Finding != "snat-missing-on-tunnel" {
				continue
			}
			return
		}
	}
	t.Fatalf("no flow through %s and %s in one timeline (of %d flows)", lab.NsNode1, lab.NsNode2, len(tr.flows))
}

// requireAlignedWithinBounds requires the second recording's clock placed
// from packets seen by both, within bounds that hold zero: both recorded
// one kernel's clock.
func requireAlignedWithinBounds(t *testing.T, log string) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Message string   `json:"message"`
			Offset  float64  `json:"offset"`
			AtLeast *float64 `json:"at_least"`
			AtMost  *float64 `json:"at_most"`
			Packets int      `json:"packets"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Message != "clock aligned" {
			continue
		}
		// zerolog writes durations in milliseconds.
		if l.Packets == 0 || (l.AtLeast == nil && l.AtMost == nil) || (l.AtLeast != nil && *l.AtLeast > 0) || (l.AtMost != nil && *l.AtMost < 0) {
			t.Fatalf("clock placed %.6f ms from the first's, bounds %s and %s, from %d packets: the true offset, 0, is outside", l.Offset, boundText(l.AtLeast), boundText(l.AtMost), l.Packets)
		}
		return
	}
	t.Fatalf("replay did not align the clocks:\n%s", log)
}

// requireClockSummarized requires the replay's summary to say how the
// second recording's clock was placed, as the bounds it found allow: one
// bound, and its times are the earliest or latest they allow.
func requireClockSummarized(t *testing.T, tr trace) {
	t.Helper()
	clocks, _ := tr.summary["clocks"].([]any)
	if len(clocks) != 1 {
		t.Fatalf("summary's clocks %v, want the second recording's", tr.summary["clocks"])
	}
	c, _ := clocks[0].(map[string]any)
	_, lower := c["at_least_ms"]
	_, upper := c["at_most_ms"]
	want := map[[2]bool]string{{true, true}: "bounded", {false, true}: "earliest", {true, false}: "latest", {false, false}: "unplaced"}[[2]bool{lower, upper}]
	if c["placement"] != want || want == "unplaced" {
		t.Fatalf("summary's clock %v: placed %v, want %s by its bounds, and placed", c, c["placement"], want)
	}
	t.Logf("the summary's clock: %v", c)
}

// boundText is a bound of the clock log in milliseconds, or "none".
func boundText(ms *float64) string {
	if ms == nil {
		return "none"
	}
	return fmt.Sprintf("%.6f ms", *ms)
}
