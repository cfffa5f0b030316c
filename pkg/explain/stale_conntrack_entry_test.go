package explain

import (
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

func TestStaleConntrackEntry(t *testing.T) {
	rs, err := fixture.Ruleset("stale-udp-entry-n1")
	if err != nil {
		t.Fatal(err)
	}
	rules := fixture.Context{Rulesets: map[uint32]*ruleset.Ruleset{fixture.Netns("n1"): rs}}
	tests := []struct {
		name    string
		events  []event.Event
		n       fixture.Context
		lost    uint64   // records the flow may have lost
		finding []string // nil: no finding
	}{
		{"the entry DNATs to the endpoint gone, unanswered", fixture.StaleUDPEntry(false, false), rules, 0, []string{
			"UDP 10.244.1.10:40000 (pod default/web-1) -> 10.96.0.43:53 (Service kube-system/kube-dns:dns, cluster IP) was DNATed to 10.244.2.20:53 in n1 PREROUTING",
			"by an existing conntrack entry (0xe1, created 1s earlier, when the rules chose 10.244.2.20:53), which no current rule chooses",
			"the rules now choose 10.244.2.10:53 (pod default/web-2) by nat KUBE-SEP-LIVEDNS3ZD6QYAVQ rule 2",
			"Nothing came back from 10.244.2.20 for the 3 datagrams sent there",
			"`conntrack -D -p udp --orig-dst 10.96.0.43 --dst-nat 10.244.2.20` in n1"}},
		{"the entry DNATs to the endpoint gone, dropped there", fixture.StaleUDPEntry(false, true), rules, 0, []string{
			"Datagrams to 10.244.2.20 were dropped on n2/cni0 (NEIGH_FAILED)"}},
		{"dropped there, records lost around it: the drop still shows it", fixture.StaleUDPEntry(false, true), rules, 7, []string{
			"Datagrams to 10.244.2.20 were dropped"}},
		{"unanswered, records lost around it: the answers may be among them", fixture.StaleUDPEntry(false, false), rules, 7, nil},
		{"the entry deleted: the rules choose again", fixture.StaleUDPEntry(true, false), rules, 0, nil},
		{"no ruleset: nothing to compare the entry with", fixture.StaleUDPEntry(false, false), fixture.Context{}, 0, nil},
		{"one datagram after the change, unanswered", fixture.StaleUDPEntry(false, false)[:3], rules, 0, nil},
	}
	for _, tt := range tests {
		// A deleted entry's successor starts a flow of its own.
		var findings []*Finding
		for _, f := range flowsOf(t, tt.events) {
			f.LostAround = tt.lost
			if fd := staleConntrackEntry(f, tt.n); fd != nil && !withheld(f, fd.restsOnAbsence) {
				findings = append(findings, fd)
			}
		}
		if len(findings) != map[bool]int{true: 1}[tt.finding != nil] {
			t.Errorf("%s: %d findings: %+v", tt.name, len(findings), findings)
			continue
		}
		if tt.finding == nil {
			continue
		}
		fd := findings[0]
		if len(fd.Evidence) == 0 {
			t.Errorf("%s: no evidence", tt.name)
		}
		for _, want := range tt.finding {
			if !strings.Contains(fd.Summary, want) {
				t.Errorf("%s: summary lacks %q:\n%s", tt.name, want, fd.Summary)
			}
		}
	}
}
