package test

import (
	"testing"
	"time"
)

// A listener in a namespace made after the run began, called at once, as
// a pod's first clients call it in a rolling update. --netns all's rescan
// links the nat point's netfilter programs there within a second; until
// then the syn point's tracepoint method sees each SYN consumed but not
// the SYN-ACK that answered it, and must claim no drop for it: every
// connection here is answered, and none may get a finding.
func TestNewNamespaceFirstCalls(t *testing.T) {
	const addr = "127.0.0.1:7771"
	w := startWatch(t, "--netns", "all", "tcp port 7771")
	for range 5 {
		ns := newNetns(t, "fresh")
		listen(t, ns, addr, 16, true)
		if err := dial(t, ns, "", addr, 5*time.Second); err != nil {
			t.Fatalf("call in a new namespace: %v", err)
		}
	}
	tr := w.stop(t)
	if len(tr.flows) == 0 {
		t.Fatal("no flow of the five calls was seen")
	}
	for _, x := range tr.explanations {
		t.Errorf("finding on an answered call: %s: %s", x.Rule, x.Summary)
	}
}
