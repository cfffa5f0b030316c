package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
)

func TestSYNDroppedAtListener(t *testing.T) {
	runRule(t, synDroppedAtListener, []ruleCase{
		{"accept queue full", fixture.SYNOverflow(false), true, []string{"SYN to 10.244.1.10:8080", "netns p1",
			"accept queue full (3/2)", "ListenOverflows +5, ListenDrops +5", "DNATed to 10.244.1.10:8080 in n1 PREROUTING"}},
		{"queued", fixture.SYNOverflow(true), false, nil},
		{"no listener involved", fixture.NoListener(), false, nil},
	})
}
