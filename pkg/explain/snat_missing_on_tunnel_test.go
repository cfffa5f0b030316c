package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
)

func TestSNATMissingOnTunnel(t *testing.T) {
	runRule(t, snatMissingOnTunnel, []ruleCase{
		{"incident 1", fixture.SNATMissing(false), true, []string{"DNATed to 10.244.2.10:8080 in n1 OUTPUT",
			"routed out of flannel.1 (VNI 1, remote VTEP 172.20.0.2)", "not SNATed", "source 172.20.0.1",
			"came back on eth0", "rp_filter (IP_RPFILTER)", "never un-DNATed"}},
		{"incident 1 without the reply", fixture.SNATMissing(false)[:9], true, []string{"no reply came back through the tunnel"}},
		{"healthy: SNATed to the tunnel address", fixture.SNATMissing(true), false, nil},
		{"SNATed, reply not seen (yet)", fixture.SNATMissing(true)[:9], false, nil},
		{"DNAT without a tunnel", fixture.SYNOverflow(true), false, nil},
	})
}
