package explain

import (
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
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
		if rule := ruleOfCheck(check); rule != "" {
			requireShipped(t, rule, flows[0])
		}
	}
}

// n2Rulesets is text parsed as namespace n2's ruleset, where the
// conntrack fixtures' drops happen.
func n2Rulesets(t *testing.T, text string) map[uint32]*ruleset.Ruleset {
	t.Helper()
	rs, err := ruleset.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return map[uint32]*ruleset.Ruleset{fixture.Netns("n2"): rs}
}

// explainCase is one row of a table over Explain: the rule it reports on
// the events' single flow, given the rulesets ("" for none), with the
// facts in its summary.
type explainCase struct {
	name     string
	events   []event.Event
	rulesets map[uint32]*ruleset.Ruleset
	want     string
	facts    []string
}

// explainOne requires what tc says of Explain and returns its finding.
func explainOne(t *testing.T, tc explainCase) *Finding {
	t.Helper()
	flows := flowsOf(t, tc.events)
	if len(flows) != 1 {
		t.Fatalf("%d flows, want 1", len(flows))
	}
	fd := Explain(flows[0], fixture.Context{Rulesets: tc.rulesets})
	if tc.want == "" && fd == nil {
		return nil
	}
	if fd == nil || fd.Rule != tc.want {
		t.Fatalf("finding %+v, want %s", fd, tc.want)
	}
	requireShipped(t, fd.Rule, flows[0])
	for _, fact := range tc.facts {
		if !strings.Contains(fd.Summary, fact) {
			t.Errorf("summary lacks %q: %s", fact, fd.Summary)
		}
	}
	return fd
}
