package test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/test/lab"
)

// TestTwoTracers: two nettraces watch the lab at once, as a DaemonSet's
// recorder and an engineer's watch do on one node, both tracing rules
// with their own filters. The kernel gives each hook's priority to one BPF program: the
// second's netfilter links take the priorities next to the first's, and
// its rule-tracing table a name of its own. Each watches every namespace,
// warns of nothing it could not watch, and names incident 1's fault.
func TestTwoTracers(t *testing.T) {
	sc := upLab(t, "snat-missing")
	var netns []string
	for _, ns := range lab.Namespaces() {
		netns = append(netns, "--netns", ns)
	}
	tracers := []struct {
		name string
		w    *watch
	}{
		{"recorder", startWatch(t, append(append([]string{"--rules"}, netns...), "net 10.0.0.0/8")...)},
		{"engineer", startWatch(t, append(append([]string{"--rules"}, netns...), "host "+lab.SNATServiceIP)...)},
	}
	outs, err := lab.Traffic(sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		t.Log(o)
	}
	for _, tc := range tracers {
		tr := tc.w.stop(t)
		for _, line := range bytes.Split(tc.w.stderr.Bytes(), []byte("\n")) {
			var l struct{ Level, Message string }
			if json.Unmarshal(line, &l) == nil && l.Level == "warn" && blinded(l.Message) {
				t.Errorf("%s: %s", tc.name, line)
			}
		}
		var named []string
		for _, x := range tr.explanations {
			named = append(named, x.Rule)
			if x.Rule == "snat-missing-on-tunnel" && !strings.Contains(x.Summary, "routed out of flannel.1") {
				t.Errorf("%s: %s", tc.name, x.Summary)
			}
		}
		if len(named) != 1 || named[0] != "snat-missing-on-tunnel" {
			t.Errorf("%s named %v, want incident 1's snat-missing-on-tunnel once", tc.name, named)
		}
	}
}

// blinded says whether a warning of watch's says it cannot see what it
// should: a point, a namespace or a rule trace given up.
func blinded(msg string) bool {
	for _, s := range []string{"not watched", "ruleset only", "not named", "unavailable"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
