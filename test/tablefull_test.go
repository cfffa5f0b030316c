package test

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/nettrace-dev/nettrace/test/lab"
)

// TestConntrackTableFull: issue 31's item 8, where the kernel is the
// tests' own (the qemu guests): it lowers nf_conntrack_max, which every
// namespace of the machine is held to. Pod p1 holds lab.TableFullMax
// connections open to p2, then calls p2: with the limit at as many, the
// call's SYNs are dropped by conntrack in a node whose table is full, and
// nettrace names the table, its limit and the fix; the twin, at the
// kernel's limit, connects and is named nothing.
func TestConntrackTableFull(t *testing.T) {
	if os.Getenv(lab.OwnKernelEnv) != "1" {
		t.Skipf("lowers the kernel's nf_conntrack_max, which this whole machine is held to: runs in the qemu guests (make vmtest), where %s=1", lab.OwnKernelEnv)
	}
	i := slices.IndexFunc(lab.Incidents(), func(in lab.Incident) bool { return in.Name == "conntrack-table-full" })
	tableFull := lab.Incidents()[i]
	twins(t, tableFull.Name, func(t *testing.T, name string, healthy bool) {
		r := runScenario(t, name, tableFull.Filter, "--rules")
		call := r.outcomes[len(r.outcomes)-1]
		if healthy {
			if res := r.results(); res[lab.Connected] != len(r.outcomes) {
				t.Fatalf("client outcomes %v, want all %d connected", res, len(r.outcomes))
			}
			r.healthy(t)
			return
		}
		if call.Result != lab.TimedOut {
			t.Fatalf("the call: %s, want it timed out", call)
		}
		xs := r.explained(t, "conntrack-table-full", "SYN "+lab.Pod1IP+":", fmt.Sprintf(" (pod default/p1) -> %s:%d (pod default/p2) was dropped by conntrack in %s", lab.Pod2IP, lab.PodPort, lab.Prefix+"n"),
			"its conntrack table was full (", fmt.Sprintf("at nf_conntrack_max %d;", lab.TableFullMax), "Raise net.netfilter.nf_conntrack_max")
		t.Logf("%s%s", xs[0].Summary, r.flowOf(xs[0]))
	})
}
