package test

import (
	"fmt"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// A ring buffer its reader does not empty (the tracer stopped): healthy
// connections through a Service-style DNAT fill it past seven eighths, and
// the failures made after that still reach the reader when it resumes: a
// SYN dropped by a rule, explained; a SYN refused with a reset, its
// client's reset always and the reset sent, explained, where the kernel
// traces it. The healthy records past that level, NAT and TCP ones among
// them, are shed and counted, and no finding rests on what they lack.
func TestFailuresKeptInAFullRing(t *testing.T) {
	const service = "10.96.66.10"
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, client, "c0", "10.98.6.1/24", server, "s0", "10.98.6.2/24")
	script(t,
		"ip netns exec "+client+" iptables -t nat -A OUTPUT -d "+service+" -p tcp -j DNAT --to-destination 10.98.6.2",
		"ip -n "+client+" route add 10.96.0.0/16 dev c0",
		"ip netns exec "+server+" iptables -A INPUT -p tcp --dport 9001 -j DROP",
	)
	listen(t, server, "10.98.6.2:8080", 0, true)
	w := startWatch(t, "--netns", client, "--netns", server, "--ring-size", "65536")
	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("stop nettrace: %v", err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			w.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)

	// A connection makes a kilobyte or more of records: 400 of them are
	// several times the 64 KiB ring, whatever shedding keeps out of it.
	// Their bound only catches a hang.
	for i := 0; i < 400; i++ {
		if err := dial(t, client, "", service+":8080", lab.Patience); err != nil {
			t.Fatalf("healthy connection %d: %v", i, err)
		}
	}
	if err := dial(t, client, "", service+":9001", 1500*time.Millisecond); err == nil {
		t.Fatalf("connection to the dropped port succeeded")
	}
	if err := dial(t, client, "", service+":7", lab.Patience); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("connection to the closed port: %v, want refused", err)
	}
	resume()
	w.await(t, "drops of the SYN to the dropped port", 1, func(e output.JSONEvent) bool {
		return e.Point == "drop" && e.Tuple != nil && e.Tuple.Dport == 9001
	})
	w.await(t, "resets received by the refused client", 1, func(e output.JSONEvent) bool {
		return e.Point == "tcp" && e.Kind == "rst-received" && e.Tuple != nil && e.Tuple.Dport == 7
	})
	want := map[string]int{"dropped-by-netfilter": 1}
	// Linux traces a reset sent without a socket (to a closed port) from
	// 6.10 on: what no-listener reads.
	if kernelAtLeast(t, 6, 10) {
		w.await(t, "resets refusing the closed port", 1, func(e output.JSONEvent) bool {
			return e.Point == "tcp" && e.Kind == "rst-sent" && e.Tuple != nil && e.Tuple.Sport == 7
		})
		want["no-listener"] = 1
	}
	tr := w.stop(t)

	shed := countsOf(tr.summary, "shed")
	evidenceShed := shedOf(tr.summary, "nat") + shedOf(tr.summary, "tcp")
	t.Logf("%.0f records shed (%.0f NAT and TCP), %.0f lost", shed, evidenceShed, lostEvents(tr.summary))
	if evidenceShed == 0 {
		t.Fatalf("no NAT or TCP record shed: the ring never reached its last eighth (summary %v)", tr.summary)
	}
	rules := map[string]int{}
	for _, x := range tr.explanations {
		rules[x.Rule]++
	}
	if !maps.Equal(rules, want) {
		t.Errorf("findings %v, want %v:\n%s", rules, want, dump(tr.explanations))
	}
	port := map[string]string{"dropped-by-netfilter": ":9001", "no-listener": " 7 "}
	for _, x := range tr.explanations {
		if !strings.Contains(x.Summary, port[x.Rule]) {
			t.Errorf("%s does not name port %q: %s", x.Rule, port[x.Rule], x.Summary)
		}
	}
}

// kernelAtLeast says whether the running kernel's release is major.minor
// or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatalf("uname: %v", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	var got [2]int
	if _, err := fmt.Sscanf(release, "%d.%d", &got[0], &got[1]); err != nil {
		t.Fatalf("kernel release %q: %v", release, err)
	}
	return got[0] > major || got[0] == major && got[1] >= minor
}

func shedOf(summary map[string]any, point string) float64 {
	m, _ := summary["shed"].(map[string]any)
	n, _ := m[point].(float64)
	return n
}
