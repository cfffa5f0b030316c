package output

import (
	"bytes"
	"cmp"
	"embed"
	"html/template"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// HTMLPage gathers what a run's page shows, flow by flow as they are
// written, and writes the page at the run's end: one self-contained file
// (inline CSS and SVG, no script, and a content security policy that lets
// nothing be fetched), which opens from a mail attachment or an air-gapped
// laptop. A large run stays a page a browser opens at once: at most
// MaxDrawn flows are drawn, the findings past them are listed (at most
// MaxListed) and counted, and the flows not drawn are counted by outcome.
type HTMLPage struct {
	drawn    []template.HTML
	listed   []listedFinding
	unlisted uint64
	rules    map[string]*ruleCount
	outcomes map[string]uint64
	flows    uint64
}

// The page's bounds on what it holds.
const (
	MaxDrawn  = 200
	MaxListed = 2000
)

// listedFinding is a finding past those drawn: a line of a table.
type listedFinding struct {
	Flow          uint64
	Rule, Summary string
}

// ruleCount is the overview's line of one rule: how many flows it
// explained, and its first.
type ruleCount struct {
	Rule    string
	Flows   uint64
	First   uint64
	Summary string
	Drawn   bool // the first is drawn: the line links to it
}

// NewHTMLPage returns an empty page.
func NewHTMLPage() *HTMLPage {
	return &HTMLPage{rules: map[string]*ruleCount{}, outcomes: map[string]uint64{}}
}

// Add takes a written flow: its section when it is drawn (HTMLFlows), its
// finding (nil for none), and its outcome (Outcome). The section is copied.
func (p *HTMLPage) Add(id uint64, fd *explain.Finding, section []byte, outcome string) {
	p.flows++
	drawn := len(section) > 0 && len(p.drawn) < MaxDrawn
	if drawn {
		p.drawn = append(p.drawn, template.HTML(section)) // #nosec: HTMLFlows escaped it
	}
	if fd == nil {
		if !drawn {
			p.outcomes[outcome]++
		}
		return
	}
	rc := p.rules[fd.Rule]
	if rc == nil {
		rc = &ruleCount{Rule: fd.Rule, First: id, Summary: fd.Summary, Drawn: drawn}
		p.rules[fd.Rule] = rc
	}
	rc.Flows++
	switch {
	case drawn:
	case len(p.listed) < MaxListed:
		p.listed = append(p.listed, listedFinding{Flow: id, Rule: fd.Rule, Summary: fd.Summary})
	default:
		p.unlisted++
	}
}

// About is what the page says of where its flows come from: the
// recordings' (or the live run's) hosts, kernels and points, and the
// namespaces they named.
type About struct {
	Recordings []trace.Meta
	Namespaces []string
}

// pageData is what pageTemplate shows.
type pageData struct {
	Title      string
	Made       string
	Findings   []*ruleCount
	Outcomes   []outcomeCount
	WithFinds  uint64
	Flows      uint64
	Drawn      []template.HTML
	Listed     []listedFinding
	Unlisted   uint64
	Run        runFigures
	Summary    string
	About      About
	NotDrawn   uint64 // flows with a finding past the drawn ones
	DrawnBound int
}

// outcomeCount is the overview's line of an outcome of flows not drawn.
type outcomeCount struct {
	Outcome string
	Flows   uint64
}

// runFigures are the summary's counts, as the overview's table shows them.
type runFigures struct {
	Duration                        string
	Events, Lost, Shed, Incomplete  uint64
	LostByPoint, ShedByPoint        string
	Flows, Evicted, Unheld, Records uint64
	// Clocks say where a merged replay placed each recording's clock
	// against the first's.
	Clocks []string
}

// maxOutcomes bounds the outcome lines; the rest are one line.
const maxOutcomes = 30

// Write writes the page: the overview (findings, flows by outcome, the
// run's summary, the recordings), then each drawn flow.
func (p *HTMLPage) Write(w io.Writer, s Summary, about About, now time.Time) error {
	d := pageData{Flows: p.flows, Drawn: p.drawn, Listed: p.listed, Unlisted: p.unlisted, About: about,
		Made: now.UTC().Format("2006-01-02 15:04:05 MST"), DrawnBound: MaxDrawn}
	d.Findings = slices.SortedFunc(maps.Values(p.rules), func(a, b *ruleCount) int {
		return cmp.Or(cmp.Compare(b.Flows, a.Flows), strings.Compare(a.Rule, b.Rule))
	})
	for _, rc := range d.Findings {
		d.WithFinds += rc.Flows
	}
	d.NotDrawn = uint64(len(p.listed)) + p.unlisted
	d.Outcomes = topOutcomes(p.outcomes)
	d.Run = figures(s)
	var sum bytes.Buffer
	WriteSummary(&sum, s)
	d.Summary = sum.String()
	d.Title = "nettrace: no finding"
	if n := d.WithFinds; n > 0 {
		d.Title = "nettrace: " + plural(n, "flow") + " with a finding"
	}
	return pageTemplate.ExecuteTemplate(w, "page", d)
}

// topOutcomes are the outcomes by count, the most first, past
// maxOutcomes folded into one line.
func topOutcomes(m map[string]uint64) []outcomeCount {
	var all []outcomeCount
	for o, n := range m {
		all = append(all, outcomeCount{o, n})
	}
	slices.SortFunc(all, func(a, b outcomeCount) int {
		return cmp.Or(cmp.Compare(b.Flows, a.Flows), strings.Compare(a.Outcome, b.Outcome))
	})
	if len(all) <= maxOutcomes {
		return all
	}
	rest := outcomeCount{}
	for _, o := range all[maxOutcomes:] {
		rest.Flows += o.Flows
	}
	rest.Outcome = plural(uint64(len(all)-maxOutcomes), "other outcome")
	return append(all[:maxOutcomes], rest)
}

// figures are the summary's counts.
func figures(s Summary) runFigures {
	r := runFigures{Duration: s.Duration.Round(time.Millisecond).String(), Incomplete: s.Incomplete,
		LostByPoint: perPointCounts(s.Lost), ShedByPoint: perPointCounts(s.Shed),
		Flows: s.Flows.Flows, Evicted: s.Flows.Evicted, Unheld: s.Flows.Unheld, Records: s.Records}
	for i, k := range s.Clocks {
		if i > 0 {
			r.Clocks = append(r.Clocks, "clock of "+k.Host+": "+clockSentence(k, s.Clocks[0].Host))
		}
	}
	for _, pt := range event.Points {
		r.Events += s.Events[pt]
		r.Lost += s.Lost[pt]
		r.Shed += s.Shed[pt]
	}
	return r
}

func plural(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.FormatUint(n, 10) + " " + what + "s"
}

//go:embed html.tmpl
var templates embed.FS

// pageTemplate holds the page ("page") and a flow's section ("flow").
var pageTemplate = template.Must(template.New("").Funcs(template.FuncMap{"join": strings.Join}).ParseFS(templates, "html.tmpl"))
