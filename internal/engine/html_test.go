package engine

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/explain"
)

// A run with -o html writes one page at its end, as watch does: every flow
// with a finding drawn once, every flow counted, and nothing else on
// stdout.
func TestPipelineWritesOnePage(t *testing.T) {
	events := incidentStream(30)
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	var page bytes.Buffer
	p := New(Options{Format: "html", Names: names, Sources: explain.Sources{Names: names}, Stdout: &page,
		About: output.About{Namespaces: []string{"n1", "n2"}}, Summarize: func(output.Summary) {}})
	for i := range events {
		p.Event(&events[i])
		if i%64 == 0 {
			p.Tick(events[i].Time)
		}
	}
	sum := p.Finish(nil, nil, 0)
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	s := page.String()
	var found uint64
	for _, n := range sum.Findings {
		found += n
	}
	if found == 0 {
		t.Fatal("no finding in the incidents")
	}
	if n := strings.Count(s, `<section class="flow"`); uint64(n) != found {
		t.Errorf("%d flows drawn, want the run's %d findings", n, found)
	}
	if !strings.HasPrefix(s, "<!DOCTYPE html>") || strings.Count(s, "</html>") != 1 {
		t.Errorf("stdout is not one page:\n%.300s", s)
	}
	if !strings.Contains(s, fmt.Sprintf("<th class=\"n\">%d</th>", sum.Flows.Flows)) {
		t.Errorf("the overview does not count the run's %d flows", sum.Flows.Flows)
	}
}
