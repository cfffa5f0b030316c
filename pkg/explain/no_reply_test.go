package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
)

func TestNoReply(t *testing.T) {
	runRule(t, noReply, []ruleCase{
		{"three SYNs, nothing back", fixture.NoReply(), true, []string{"SYN 10.0.0.1:40002 -> 10.0.0.9:80 was sent 3 times", "last seen on n1/eth0 (dev tx)"}},
		{"the last dropped past the devices", fixture.NoReplyDroppedBySocket(), true, []string{
			"last seen dropped (NOT_SPECIFIED at ip_rcv_finish_core+0x25b) in n2, past its devices (last: n2/eth0)."}},
		{"one SYN only", fixture.NoReply()[:3], false, nil},
		{"answered", fixture.SYNOverflow(true), false, nil},
	})
}
