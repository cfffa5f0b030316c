package test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// methodsHere lists the methods that attach for a point on this kernel,
// by forcing each in turn.
func methodsHere(t *testing.T, point string, candidates ...string) []string {
	t.Helper()
	var ok []string
	for _, m := range candidates {
		out, err := exec.Command(nettraceBin, "probes", "--json", "--method", point+"="+m).Output()
		if err != nil {
			continue
		}
		var r probesReport
		if json.Unmarshal(out, &r) != nil {
			continue
		}
		for _, s := range r.Points {
			if s.Point == point && string(s.Method) == m {
				ok = append(ok, m)
			}
		}
	}
	return ok
}

// factsOf runs a lab scenario with a point's method forced and returns
// the facts that point reports, as comparable strings.
func factsOf(t *testing.T, scenario, filter, point, method string, facts func(r labRun) []string) []string {
	t.Helper()
	var got []string
	t.Run(point+"="+method, func(t *testing.T) {
		got = facts(runScenario(t, scenario, filter, "--method", point+"="+method))
		sort.Strings(got)
	})
	return got
}

// Where a kernel offers both a point's preferred method and its fallback,
// both report the same facts for the same traffic: the vxlan hop (device,
// VNI, VTEPs), the re-route after the DNAT, and a SYN's outcome at a full
// listener. A point with one method on this kernel is skipped: CI's kernel
// offers one method per point; the VM kernels offer several.
func TestMethodsReportTheSameFacts(t *testing.T) {
	checks := []struct {
		point, scenario, filter string
		candidates              []string
		facts                   func(r labRun) []string
	}{
		{"vxlan", "snat-missing", "host " + lab.SNATServiceIP, []string{"fentry", "kprobe", "tp_btf"}, func(r labRun) []string {
			for _, e := range find(r.events, func(e output.JSONEvent) bool {
				return e.Point == "vxlan" && e.Kind == "encap" && e.Netns == lab.NsNode1
			}) {
				return []string{fmt.Sprintf("dev %s vni %d %s -> %s port %d inner %s -> %s", e.Dev, e.VXLAN.VNI,
					e.VXLAN.Local, e.VXLAN.Remote, e.Tuple.Dport, e.Inner.Src, e.Inner.Dst)}
			}
			return nil
		}},
		{"syn", "syn-overflow", "port 30285", []string{"fentry", "kprobe", "tp_btf", "sock_diag"}, func(r labRun) []string {
			outcomes := map[string]bool{}
			for _, e := range find(r.events, func(e output.JSONEvent) bool { return e.Point == "syn" && e.SYN.Dropped }) {
				outcomes[e.SYN.Listener+" "+e.SYN.Outcome+" "+e.Netns] = true
			}
			var f []string
			for o := range outcomes {
				f = append(f, o)
			}
			return f
		}},
	}
	for _, c := range checks {
		t.Run(c.point, func(t *testing.T) {
			methods := methodsHere(t, c.point, c.candidates...)
			if len(methods) < 2 {
				t.Skipf("%s: one method on this kernel (%v): nothing to compare", c.point, methods)
			}
			want := factsOf(t, c.scenario, c.filter, c.point, methods[0], c.facts)
			if len(want) == 0 {
				t.Errorf("%s=%s reported none of the facts compared", c.point, methods[0])
			}
			for _, m := range methods[1:] {
				if got := factsOf(t, c.scenario, c.filter, c.point, m, c.facts); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s: %s reports %q, %s reports %q", c.point, methods[0], want, m, got)
				}
			}
		})
	}
}
