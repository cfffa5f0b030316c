package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
)

func TestReplyBypassedNAT(t *testing.T) {
	runRule(t, replyBypassedNAT, []ruleCase{
		{"hairpin without SNAT", fixture.Hairpin(false), true, []string{"reply from 10.244.1.20:443 (pod ingress/ingress-nginx) to 10.244.1.10:40000 (pod default/web-1)",
			"called 172.20.0.100:443", "received from 10.244.1.20:443", "DNATed in n1 PREROUTING and not SNATed, so the reply went straight to the client (p1)", "reset"}},
		{"hairpin with SNAT", fixture.Hairpin(true), false, nil},
		{"reply crossed the NAT host", fixture.SNATMissing(true), false, nil},
		{"client is the NAT host", fixture.SNATMissing(false), false, nil},
		{"trace began past the DNAT", fixture.TraceBeganPastDNAT(), false, nil},
	})
}
