package explain

import (
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// ruleCase is one row of a rule's table: events, and whether the rule
// fires on their (single) flow with the given facts in its summary.
type ruleCase struct {
	name   string
	events []event.Event
	fires  bool
	facts  []string
}

func flowsOf(t *testing.T, events []event.Event) []*flow.Flow {
	t.Helper()
	c := flow.New(flow.DefaultConfig)
	var out []*flow.Flow
	for i := range events {
		c.Add(&events[i], func(f *flow.Flow) { out = append(out, f.Clone()) })
	}
	c.Flush(func(f *flow.Flow) { out = append(out, f.Clone()) })
	return out
}

func runRule(t *testing.T, check func(*flow.Flow, Context) *Finding, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		flows := flowsOf(t, tc.events)
		if len(flows) != 1 {
			t.Errorf("%s: %d flows, want 1", tc.name, len(flows))
			continue
		}
		fd := check(flows[0], fixture.Context{})
		if (fd != nil) != tc.fires {
			t.Errorf("%s: fired %v, want %v (%+v)", tc.name, fd != nil, tc.fires, fd)
			continue
		}
		if fd == nil {
			continue
		}
		for _, f := range tc.facts {
			if !strings.Contains(fd.Summary, f) {
				t.Errorf("%s: summary lacks %q: %s", tc.name, f, fd.Summary)
			}
		}
		if len(fd.Evidence) == 0 {
			t.Errorf("%s: no evidence", tc.name)
		}
	}
}
