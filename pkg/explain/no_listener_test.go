package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
)

func TestNoListener(t *testing.T) {
	runRule(t, noListener, []ruleCase{
		{"reset for a SYN", fixture.NoListener(), true, []string{"SYN 10.0.0.1:40000 -> 10.0.0.2:9002", "reached n2", "nothing listens on port 9002"}},
		{"reset for a SYN-ACK is not this", fixture.Hairpin(false), false, nil},
		{"answered", fixture.SYNOverflow(true), false, nil},
	})
}
