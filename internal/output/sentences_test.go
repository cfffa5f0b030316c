package output

import (
	"regexp"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// seams are what a sentence assembled from parts shows where a part was
// missing or two did not fit: an empty name ("on  (", "in ,"), doubled
// or stray punctuation, Go's formatting of a missing value.
var seams = regexp.MustCompile(`  |\( |\(\)| [,.;:)]|[,;][^ \n]|\.\.|,,|%!|<nil>|invalid IP|netns:0\b`)

// Every rule's finding, rendered as the timeline shows it, reads as a
// sentence: each incident's fixture is rendered, each rule fires on one,
// and no line of a finding has a seam. The renderings are logged, to be
// read (go test -v -run TestFindingsReadAsSentences ./internal/output).
func TestFindingsReadAsSentences(t *testing.T) {
	filter, err := ruleset.Parse("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n")
	if err != nil {
		t.Fatal(err)
	}
	staleUDP, err := fixture.Ruleset("stale-udp-entry-n1")
	if err != nil {
		t.Fatal(err)
	}
	fixtures := map[string][]event.Event{
		"incident 1": fixture.SNATMissing(false), "incident 2": fixture.SYNOverflow(false),
		"incident 4": fixture.StaleHostPort(false), "incident 5": fixture.Hairpin(false),
		"no listener": fixture.NoListener(), "netfilter drop": fixture.NetfilterDrop(),
		"conntrack clash": fixture.ConntrackClash(), "conntrack table full": fixture.ConntrackTableFull(), "no reply": fixture.NoReply(), "no reply, dropped by a socket": fixture.NoReplyDroppedBySocket(),
		"rp_filter": fixture.RPFilterReply(), "hairpin mode off": fixture.HairpinOff(false),
		"mtu black hole":    fixture.MTUBlackHole(fixture.NoticeDropped),
		"conntrack INVALID": fixture.ConntrackInvalid(false, false, false), "stale UDP entry": fixture.StaleUDPEntry(false, true),
	}
	// n1's nat table, for the fixture whose finding compares with it.
	n1 := map[string]*ruleset.Ruleset{"stale UDP entry": staleUDP}
	fired := map[string]bool{}
	for name, events := range fixtures {
		fx := fixture.Context{Rulesets: map[uint32]*ruleset.Ruleset{fixture.Netns("n2"): filter, fixture.Netns("n1"): n1[name]}}
		names := Names{DropReason: fx.ReasonName, Symbol: fx.SymbolName, Netns: fx.NetnsName}
		var text strings.Builder
		tx := NewText(&text, names)
		c := flow.New(flow.DefaultConfig)
		show := func(f *flow.Flow) {
			r := explain.NewReport(f, fx, tx.Timelines.Detail())
			fd := r.Finding
			if fd == nil {
				return
			}
			fired[fd.Rule] = true
			text.Reset()
			tx.Flow(f, r)
			t.Logf("%s:\n%s", name, text.String())
			finding := false
			for _, line := range strings.Split(text.String(), "\n") {
				line = strings.TrimSpace(line)
				if strings.HasPrefix(line, fd.Rule+": ") {
					finding = true
					if !strings.HasSuffix(line, ".") {
						t.Errorf("%s: %s's finding does not end as a sentence: %q", name, fd.Rule, line)
					}
				}
				if !finding {
					continue
				}
				if m := seams.FindString(line); m != "" {
					t.Errorf("%s: %s's finding has a seam %q in %q", name, fd.Rule, m, line)
				}
			}
			if !finding {
				t.Errorf("%s: no line of the timeline gives %s's finding:\n%s", name, fd.Rule, text.String())
			}
		}
		for i := range events {
			c.Add(&events[i], show)
		}
		c.Flush(show)
	}
	for _, r := range explain.Rules {
		if !fired[r.ID] {
			t.Errorf("no fixture shows %s: its sentence was not read", r.ID)
		}
	}
}
