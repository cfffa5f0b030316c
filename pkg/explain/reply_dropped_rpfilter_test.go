package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
)

func TestReplyDroppedRPFilter(t *testing.T) {
	runRule(t, replyDroppedRPFilter, []ruleCase{
		{"reply dropped", fixture.RPFilterReply(), true, []string{"reply 10.0.0.2:80 -> 10.0.0.1:40003", "IP_RPFILTER", "n1/eth1"}},
		{"no drop", fixture.SNATMissing(true), false, nil},
		{"request dropped is not a reply", fixture.NetfilterDrop(), false, nil},
	})
}
