package output

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// The summary of a merged replay says, of each recording but the first,
// where its clock was placed and how far its times can be trusted: within
// half the bounds where packets went both ways, as the earliest or latest
// the packets allow where they went one way only.
func TestSummarySaysHowEachClockWasPlaced(t *testing.T) {
	first := trace.ClockSkew{Host: "node1"}
	for _, tc := range []struct {
		name string
		k    trace.ClockSkew
		want []string
	}{
		{"both ways", trace.ClockSkew{Host: "node2", Offset: -482370 * time.Microsecond, Packets: 6,
			Lower: -484270 * time.Microsecond, Upper: -480470 * time.Microsecond, HasLower: true, HasUpper: true},
			[]string{"clock of node2: 482.370 ms behind node1's by 6 packets", "both ways", "right within 1.900 ms"}},
		{"towards it only", trace.ClockSkew{Host: "node2", Offset: -480307 * time.Microsecond, Packets: 3,
			Upper: -480305 * time.Microsecond, HasUpper: true},
			[]string{"480.307 ms behind node1's by 3 packets", "all towards node2", "the earliest they allow", "later"}},
		{"from it only", trace.ClockSkew{Host: "node2", Offset: 12 * time.Millisecond, Packets: 1,
			Lower: 12 * time.Millisecond, HasLower: true},
			[]string{"12.000 ms ahead of node1's by 1 packet seen", "all from node2", "the latest they allow", "earlier"}},
		{"no packet on both", trace.ClockSkew{Host: "node2"},
			[]string{"clock of node2: not placed", "its own clock's"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			WriteSummary(&b, Summary{Clocks: []trace.ClockSkew{first, tc.k}})
			_, line, _ := strings.Cut(b.String(), "nettrace: clock of ")
			line = "clock of " + line
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("summary %q: want %q in its clock line", b.String(), w)
				}
			}
			if seams.MatchString(strings.TrimSuffix(line, "\n")) {
				t.Errorf("clock line %q has a seam", line)
			}
			if strings.Count(b.String(), "clock of") != 1 {
				t.Errorf("summary %q: want one clock line, the first recording's clock none", b.String())
			}
		})
	}
}
