package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestConntrackInvalid(t *testing.T) {
	runRule(t, conntrackInvalid, []ruleCase{
		{"judged INVALID and dropped", fixture.ConntrackInvalid(false, false, false), true, []string{
			"TCP segment [P.] 10.244.2.10:8080 (pod default/web-2) -> 10.244.1.10:40000 (pod default/web-1) of the connection to 10.96.0.42:80",
			"was judged INVALID by conntrack in n2 PREROUTING, and a netfilter DROP verdict dropped it (after PREROUTING",
			"`sysctl -w net.netfilter.nf_conntrack_tcp_be_liberal=1` in n2"}},
		{"judged INVALID, answered with a reset", fixture.ConntrackInvalid(false, false, true), true, []string{
			"judged INVALID by conntrack in n2 PREROUTING, reached 10.244.1.10 untranslated, and was answered with a reset"}},
		{"conntrack liberal: accepted and un-DNATed", fixture.ConntrackInvalid(true, false, false), false, nil},
		{"after the connection's FIN", fixture.ConntrackInvalid(false, true, false), false, nil},
		{"judged INVALID, passed on: no NAT to miss, nothing dropped", passedOn(), false, nil},
		{"a SYN dropped by a rule, no verdict", fixture.NetfilterDrop(), false, nil},
	})
}

// passedOn is the INVALID segment of fixture.ConntrackInvalid reaching p1
// as it came, unanswered.
func passedOn() []event.Event {
	evs := fixture.ConntrackInvalid(false, false, true)
	return evs[:len(evs)-1]
}
