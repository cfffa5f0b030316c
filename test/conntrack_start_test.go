package test

import (
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// Where conntrack does not run there is no NAT to watch: the netfilter
// method then links nat_watch alone there (bpf/nat.bpf.c), one run a
// packet in place of the NAT programs' four hooks, until conntrack starts.
// Here a namespace without rules is found so, then gets its first NAT
// rule: the NAT programs must be back, its translations reported, and the
// packets conntrack tracked before they were back counted lost, never
// taken for packets NAT left alone.
func TestNATWatchedOnceConntrackStarts(t *testing.T) {
	ns := newNetns(t, "ctstart")
	w := startWatch(t, "--netns", ns, "--method", "nat=netfilter", "tcp port 7 or tcp port 8")
	// Nothing listens on either port: each SYN is answered by a reset.
	knock := func() { dial(t, ns, "", "127.0.0.1:7", time.Second) }

	w.awaitLog(t, "conntrack off", knock)
	sh(t, "ip", "netns", "exec", ns, "iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "--dport", "7",
		"-j", "DNAT", "--to-destination", "127.0.0.1:8")
	w.awaitLog(t, "conntrack started", knock)
	dnat := func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Hook == "OUTPUT" && e.Netns == ns && e.Pre != nil && e.Pre.Dport == 7 &&
			e.Tuple != nil && e.Tuple.Dport == 8
	}
	for deadline := time.Now().Add(lab.Patience); w.count(dnat) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no DNAT of port 7 to 8 reported in %s after %s; stderr:\n%s", ns, lab.Patience, w.stderr.String())
		}
		knock()
	}
	tr := w.stop(t)

	if m := tr.attached["nat"].method; m != "netfilter" {
		t.Fatalf("the nat point attached by %q, not netfilter", m)
	}
	// nat_watch counts each packet conntrack tracks until the NAT
	// programs are back, and the first SYN after the rule is one.
	if lost := countsOf(tr.summary, "lost"); lost < 1 {
		t.Errorf("no record counted lost between conntrack's start and the NAT programs' return (summary %v)", tr.summary)
	}
}

// awaitLog does what until watch logs a line whose message begins with
// msg: something watch sees only as packets pass.
func (w *watch) awaitLog(t *testing.T, msg string, what func()) {
	t.Helper()
	for deadline := time.Now().Add(lab.Patience); len(logLines(t, w.stderr.Bytes(), msg)) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not log %q after %s; stderr:\n%s", msg, lab.Patience, w.stderr.String())
		}
		what()
	}
}
