package test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// A ring buffer its reader does not empty (the tracer stopped): healthy
// connections through a Service-style DNAT fill it past seven eighths, and
// the failures made after that still reach the reader when it resumes. A
// SYN dropped by a rule and a SYN refused with a reset are explained; the
// healthy records past that level, NAT and TCP ones among them, are shed
// and counted, and no finding rests on what they lack.
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
	w.await(t, "resets refusing the closed port", 1, func(e output.JSONEvent) bool {
		return e.Point == "tcp" && e.Kind == "rst-sent" && e.Tuple != nil && e.Tuple.Sport == 7
	})
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
	if rules["dropped-by-netfilter"] != 1 || rules["no-listener"] != 1 || len(tr.explanations) != 2 {
		t.Errorf("findings %v, want dropped-by-netfilter and no-listener once each:\n%s", rules, dump(tr.explanations))
	}
	port := map[string]string{"dropped-by-netfilter": ":9001", "no-listener": " 7 "}
	for _, x := range tr.explanations {
		if !strings.Contains(x.Summary, port[x.Rule]) {
			t.Errorf("%s does not name port %q: %s", x.Rule, port[x.Rule], x.Summary)
		}
	}
}

func shedOf(summary map[string]any, point string) float64 {
	m, _ := summary["shed"].(map[string]any)
	n, _ := m[point].(float64)
	return n
}
