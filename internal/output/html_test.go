package output

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// renderPage runs events through the correlator and the rules, as a
// replay does, into a page; it returns the page and each flow's report.
func renderPage(t *testing.T, events []event.Event, names Names, ctx explain.Context) (*html.Node, map[uint64]*explain.Report, map[uint64]drawing) {
	t.Helper()
	page := NewHTMLPage()
	flows := &HTMLFlows{Names: names}
	reports, drawings := map[uint64]*explain.Report{}, map[uint64]drawing{}
	c := flow.New(flow.DefaultConfig)
	add := func(f *flow.Flow) {
		r := explain.NewReport(f, ctx, explain.Detail{Steps: explain.FlowsWithFinding, NATRules: explain.FlowsWithFinding})
		reports[f.ID] = r
		if r.Finding != nil {
			drawings[f.ID] = expectDrawing(f, r, names)
		}
		page.Add(f.ID, r.Finding, flows.AppendFlow(nil, f, r), Outcome(r))
	}
	for i := range events {
		c.Add(&events[i], add)
	}
	c.Flush(add)
	var b bytes.Buffer
	if err := page.Write(&b, Summary{Duration: time.Second}, About{}, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	return doc, reports, drawings
}

// The page draws what each report says of a flow with a finding: its
// sentence, a lifeline per namespace its packets crossed, an arrow per
// move between two, each NAT and drop the timeline shows where it
// happened; and it fetches nothing.
func TestHTMLDrawsTheReport(t *testing.T) {
	fx := fixture.Context{}
	names := Names{DropReason: fx.ReasonName, Symbol: fx.SymbolName, Netns: fx.NetnsName}
	for name, events := range map[string][]event.Event{
		"incident 1": fixture.SNATMissing(false), "incident 2": fixture.SYNOverflow(false),
		"incident 4": fixture.StaleHostPort(false), "incident 5": fixture.Hairpin(false),
	} {
		t.Run(name, func(t *testing.T) {
			doc, reports, drawings := renderPage(t, events, names, fx)
			requireSelfContained(t, doc)
			drawn := 0
			for id, r := range reports {
				sec := byID(doc, fmt.Sprintf("flow-%d", id))
				if r.Finding == nil {
					if sec != nil {
						t.Errorf("flow %d has no finding and is drawn", id)
					}
					continue
				}
				drawn++
				if sec == nil {
					t.Fatalf("flow %d's finding %s is not drawn", id, r.Finding.Rule)
				}
				requireDrawn(t, sec, id, r.Finding, drawings[id])
			}
			if drawn == 0 {
				t.Fatal("no flow with a finding")
			}
		})
	}
}

// drawing is what a flow's diagram must show, from its report.
type drawing struct {
	lanes []string
	moves map[string]bool
	notes map[string]map[string]bool // by kind: "netns: words"
}

// expectDrawing reads from a flow and its report what its diagram must
// show: the namespaces its packets crossed, each move between two, and
// the NATs and drops the timeline shows.
func expectDrawing(f *flow.Flow, r *explain.Report, names Names) drawing {
	d := drawing{moves: map[string]bool{}, notes: map[string]map[string]bool{"nat": {}, "drop": {}}}
	lane := func(e *event.Event) string {
		ns := names.NetnsName(e.Netns)
		if names.Host != nil {
			ns = strings.TrimPrefix(ns, names.Host(e.Netns)+":")
		}
		return ns
	}
	for i, p := range f.Packets {
		for k := range p.Events {
			e, s := &p.Events[k], r.Packets[i].Steps[k]
			ns := lane(e)
			if !slices.Contains(d.lanes, ns) {
				d.lanes = append(d.lanes, ns)
			}
			if k > 0 && p.Events[k-1].Netns != e.Netns {
				d.moves[lane(&p.Events[k-1])+" -> "+ns] = true
			}
			switch {
			case !s.Shown:
			case e.Point == event.PointDrop && r.Packets[i].Ordinary == "", e.Point == event.PointSYN && e.SYN.Outcome.Dropped():
				d.notes["drop"][ns+": "+s.Timeline] = true
			case e.Point == event.PointNAT && e.Translation() != 0:
				d.notes["nat"][ns+": "+s.Timeline] = true
			}
		}
	}
	return d
}

// requireDrawn checks one flow's section against what its report says.
func requireDrawn(t *testing.T, sec *html.Node, id uint64, fd *explain.Finding, want drawing) {
	t.Helper()
	finding := all(sec, func(n *html.Node) bool { return hasClass(n, "finding") })
	if len(finding) != 1 || attr(finding[0], "data-rule") != fd.Rule || !strings.Contains(text(finding[0]), fd.Summary) {
		t.Errorf("flow %d: the finding box does not hold %s: %s", id, fd.Rule, fd.Summary)
	}
	var gotLanes []string
	gotMoves := map[string]bool{}
	for _, n := range all(sec, func(n *html.Node) bool { return hasClass(n, "lifeline") }) {
		gotLanes = append(gotLanes, attr(n, "data-netns"))
	}
	if !slices.Equal(gotLanes, want.lanes) {
		t.Errorf("flow %d: lifelines %q, want %q", id, gotLanes, want.lanes)
	}
	for _, n := range all(sec, func(n *html.Node) bool { return hasClass(n, "arrow") }) {
		gotMoves[attr(n, "data-from")+" -> "+attr(n, "data-to")] = true
	}
	if !mapsEqual(gotMoves, want.moves) {
		t.Errorf("flow %d: arrows %v, want %v", id, gotMoves, want.moves)
	}
	for kind, want := range want.notes {
		got := map[string]bool{}
		for _, n := range all(sec, func(n *html.Node) bool { return hasClass(n, kind) }) {
			got[attr(n, "data-netns")+": "+attr(n, "data-what")] = true
		}
		if !mapsEqual(got, want) {
			t.Errorf("flow %d: %s notes %v, want %v", id, kind, got, want)
		}
	}
}

// requireSelfContained fails a page that could fetch anything: a script,
// a link or a source outside it, or no policy forbidding it.
func requireSelfContained(t *testing.T, doc *html.Node) {
	t.Helper()
	csp := all(doc, func(n *html.Node) bool { return n.Data == "meta" && attr(n, "http-equiv") == "Content-Security-Policy" })
	if len(csp) != 1 || !strings.HasPrefix(attr(csp[0], "content"), "default-src 'none'") {
		t.Error("the page has no content security policy forbidding every fetch")
	}
	for _, n := range all(doc, func(n *html.Node) bool { return n.Type == html.ElementNode }) {
		if n.Data == "script" || n.Data == "link" || n.Data == "img" || n.Data == "iframe" {
			t.Errorf("the page has a <%s>", n.Data)
		}
		for _, a := range n.Attr {
			if (a.Key == "href" || a.Key == "src") && !strings.HasPrefix(a.Val, "#") {
				t.Errorf("<%s %s=%q> leads outside the page", n.Data, a.Key, a.Val)
			}
		}
	}
}

// What a recording says is shown as text, never as markup: a namespace
// named like a script is a name.
func TestHTMLEscapesNames(t *testing.T) {
	fx := fixture.Context{}
	hostile := "<script>alert(1)</script>"
	names := Names{DropReason: fx.ReasonName, Symbol: fx.SymbolName, Netns: func(ino uint32) string { return hostile + fx.NetnsName(ino) }}
	doc, _, _ := renderPage(t, fixture.SNATMissing(false), names, fx)
	requireSelfContained(t, doc)
	lanes := all(doc, func(n *html.Node) bool { return hasClass(n, "lifeline") })
	if len(lanes) == 0 || !strings.HasPrefix(text(lanes[0]), hostile) {
		t.Fatalf("the lifelines do not show the namespace's name as text")
	}
}

// A page for many flows draws MaxDrawn, lists the findings past them, and
// counts the healthy flows by outcome.
func TestHTMLPageBounds(t *testing.T) {
	page := NewHTMLPage()
	fd := &explain.Finding{Rule: "no-reply", Summary: "SYN got nothing back."}
	for id := range uint64(MaxDrawn + 30) {
		page.Add(id, fd, []byte(fmt.Sprintf(`<section class="flow" id="flow-%d"></section>`, id)), "")
	}
	for id := range uint64(1000) {
		page.Add(10_000+id, nil, nil, fmt.Sprintf("delivered locally in p%d", id%3))
	}
	var b bytes.Buffer
	if err := page.Write(&b, Summary{}, About{}, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(all(doc, func(n *html.Node) bool { return hasClass(n, "flow") })); n != MaxDrawn {
		t.Errorf("%d flows drawn, want %d", n, MaxDrawn)
	}
	listed := byID(doc, "listed")
	if listed == nil || len(all(listed, func(n *html.Node) bool { return n.Data == "tr" })) != 31 {
		t.Errorf("the findings past the drawn ones are not listed, one row each")
	}
	outcomes := all(doc, func(n *html.Node) bool { return hasClass(n, "outcome") })
	if len(outcomes) != 3 || !strings.Contains(text(outcomes[0]), "334") {
		t.Errorf("outcomes %d rows, first %q; want 3, the first of 334 flows", len(outcomes), text(outcomes[0]))
	}
}

// A merged replay's flow groups its lifelines by host.
func TestHTMLGroupsByHost(t *testing.T) {
	fx := fixture.Context{}
	host := map[string]string{"n1": "node-1", "p1": "node-1", "ul": "node-1", "n2": "node-2", "p2": "node-2"}
	names := Names{DropReason: fx.ReasonName, Symbol: fx.SymbolName,
		Netns: func(ino uint32) string { return host[fx.NetnsName(ino)] + ":" + fx.NetnsName(ino) },
		Host:  func(ino uint32) string { return host[fx.NetnsName(ino)] }}
	doc, _, _ := renderPage(t, fixture.SNATMissing(false), names, fx)
	var hosts []string
	for _, n := range all(doc, func(n *html.Node) bool { return hasClass(n, "host") }) {
		hosts = append(hosts, attr(n, "data-host"))
	}
	if !slices.Equal(hosts, []string{"node-1", "node-2"}) {
		t.Fatalf("host groups %q, want node-1, node-2", hosts)
	}
	for _, n := range all(doc, func(n *html.Node) bool { return hasClass(n, "lifeline") }) {
		if strings.Contains(attr(n, "data-netns"), ":") {
			t.Errorf("lifeline %q repeats its host", attr(n, "data-netns"))
		}
	}
}

func all(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && match(c) {
			out = append(out, c)
		}
	}
	return out
}

func byID(doc *html.Node, id string) *html.Node {
	found := all(doc, func(n *html.Node) bool { return attr(n, "id") == id })
	if len(found) == 0 {
		return nil
	}
	return found[0]
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	return slices.Contains(strings.Fields(attr(n, "class")), class)
}

func text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
