package test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/nettrace-dev/nettrace/internal/output"
)

// The seed incidents, as the lab runs them, with the number the seeds
// have (../shared/seeds) and the page's screenshot name.
var seedPages = []struct {
	seed, scenario string
	// all draws every flow: the seed is healthy (the kube-proxy walk),
	// and its page shows how each flow was translated.
	all bool
}{
	{"000", "snat-missing", false},
	{"001", "syn-overflow", false},
	{"002", "service-paths", true},
	{"003", "stale-hostport", false},
	{"004", "hairpin", false},
}

// Each seed incident, recorded in the lab and replayed as a page, opens in
// headless Chromium with no request leaving the page, and its DOM draws
// what the report (the JSON replay of the same recording) says of each
// flow: its finding, a lifeline per namespace its packets crossed, an
// arrow per move between two, each NAT and each loss where it happened.
// NETTRACE_SCREENSHOTS=DIR keeps each page's first flow as DIR/SEED.png
// (docs/img holds them).
func TestHTMLReportInBrowser(t *testing.T) {
	browser := startBrowser(t)
	for _, s := range seedPages {
		t.Run(s.seed+"-"+s.scenario, func(t *testing.T) {
			c := scenarioCheckOf(t, s.scenario)
			r := runScenario(t, s.scenario, c.filter, "--rules")
			var args []string
			if s.all {
				args = []string{"--timelines", "all"}
			}
			requirePageDrawsReport(t, browser, []string{r.recording}, s.seed+"-"+s.scenario, false, args...)
		})
	}
}

// scenarioCheckOf finds a lab scenario's check (its filter).
func scenarioCheckOf(t *testing.T, scenario string) scenarioCheck {
	t.Helper()
	for _, c := range scenarioChecks {
		if c.scenario == scenario {
			return c
		}
	}
	t.Fatalf("no lab scenario %s", scenario)
	return scenarioCheck{}
}

// browser is a headless Chromium, shared by a test's pages.
type browser struct{ ctx context.Context }

// startBrowser starts Debian's chromium, headless, stopped at cleanup.
func startBrowser(t *testing.T) browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		// make test installs it (scripts/deps.sh): missing, the test fails.
		t.Fatal("chromium is not installed (scripts/deps.sh installs it)")
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The browser starts with the first action on its context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return browser{ctx}
}

// pageDOM is what the browser's DOM holds of a page: each drawn flow.
type pageDOM struct {
	Title string    `json:"title"`
	Flows []flowDOM `json:"flows"`
	Rules []string  `json:"rules"` // the overview's findings
}

// flowDOM is a flow's section as the browser built it.
type flowDOM struct {
	ID       string   `json:"id"`
	Rule     string   `json:"rule"`
	Sentence string   `json:"sentence"`
	Hosts    []string `json:"hosts"`
	Lanes    []string `json:"lanes"`
	Arrows   []string `json:"arrows"`
	NAT      []string `json:"nat"`
	Lost     []string `json:"lost"`
	Height   float64  `json:"height"`
}

// domScript reads pageDOM out of the page.
const domScript = `(() => {
	const all = (e, sel, f) => [...e.querySelectorAll(sel)].map(f);
	return {
		title: document.title,
		rules: all(document, 'tr.rule-count', r => r.dataset.rule),
		flows: all(document, 'section.flow', s => ({
			id: s.dataset.flow,
			rule: s.querySelector('.finding') ? s.querySelector('.finding').dataset.rule : '',
			sentence: s.querySelector('.finding .sentence') ? s.querySelector('.finding .sentence').textContent : '',
			hosts: all(s, 'g.host', g => g.dataset.host),
			lanes: all(s, 'g.lifeline', g => g.dataset.netns),
			arrows: all(s, 'g.arrow', g => g.dataset.from + ' -> ' + g.dataset.to),
			nat: all(s, 'g.nat', g => g.dataset.netns + ': ' + g.dataset.what),
			lost: all(s, 'g.drop', g => g.dataset.netns + ': ' + g.dataset.what),
			height: s.querySelector('svg').getBoundingClientRect().height,
		})),
	};
})()`

// requirePageDrawsReport replays recordings as a page and as JSON (with
// args), opens the page in the browser, requires its DOM to draw what the
// JSON report says, and returns the DOM; merged says the recordings are
// several hosts', whose names a replay puts before their namespaces'.
func requirePageDrawsReport(t *testing.T, b browser, recordings []string, shot string, merged bool, args ...string) pageDOM {
	t.Helper()
	var copies []string
	for _, r := range recordings {
		copies = append(copies, copyForNobody(t, r))
	}
	page := filepath.Join(t.TempDir(), "report.html")
	cmd := unprivileged(append(append([]string{"replay", "-o", "html"}, args...), copies...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replay -o html: %v\n%s", err, stderr.String())
	}
	if err := os.WriteFile(page, stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	report := replayReport(t, copies, args...)
	dom, shotPNG := openPage(t, b, page)
	requireDOMDrawsReport(t, dom, report, merged, args)
	keepScreenshot(t, shot, shotPNG)
	return dom
}

// replayReport replays recordings together as JSON, with args: the
// report a page must draw.
func replayReport(t *testing.T, recordings []string, args ...string) trace {
	t.Helper()
	cmd := unprivileged(append(append([]string{"replay", "-o", "json", "--timelines", "all"}, args...), recordings...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replay -o json: %v\n%s", err, stderr.String())
	}
	return parseTrace(t, stdout.Bytes())
}

// openPage loads a page in the browser and returns its DOM and a
// screenshot of its first flow; it fails the test if the page asked for
// anything but itself, or logged anything (a refused fetch, an error).
func openPage(t *testing.T, b browser, page string) (pageDOM, []byte) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx) // a tab of its own
	defer cancel()
	url := "file://" + page
	var mu sync.Mutex
	var requests, logged []string
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if ev.Request.URL != url {
				requests = append(requests, ev.Request.URL)
			}
		case *runtime.EventExceptionThrown:
			logged = append(logged, "exception: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			logged = append(logged, "console: "+string(ev.Type))
		case *cdplog.EventEntryAdded:
			logged = append(logged, string(ev.Entry.Level)+": "+ev.Entry.Text)
		}
	})
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	for _, enable := range []func() error{
		func() error { _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); return err },
		func() error { _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); return err },
	} {
		if err := enable(); err != nil {
			t.Fatalf("chromium: %v", err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatalf("open %s in chromium: %v", page, err)
	}
	dom, err := chromedp.Run(ctx, chromedp.Evaluate[pageDOM](domScript))
	if err != nil {
		t.Fatalf("read the page's DOM: %v", err)
	}
	var shot []byte
	if len(dom.Flows) > 0 {
		shot, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("section.flow")))
	} else {
		shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	}
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) > 0 || len(logged) > 0 {
		t.Errorf("the page asked for %q and logged %q; want neither", requests, logged)
	}
	return dom, shot
}

// requireDOMDrawsReport requires each flow the report shows whole to be
// drawn as it says, and the overview to list its findings.
func requireDOMDrawsReport(t *testing.T, dom pageDOM, report trace, merged bool, args []string) {
	t.Helper()
	rules := map[uint64]string{}
	for _, x := range report.explanations {
		rules[x.Flow.ID] = x.Rule
	}
	drawn := map[string]flowDOM{}
	for _, f := range dom.Flows {
		drawn[f.ID] = f
	}
	all := slices.Contains(args, "all")
	want := 0
	for _, f := range report.flows {
		if !all && f.Finding == "" {
			continue
		}
		want++
		got, ok := drawn[strconv.FormatUint(f.ID, 10)]
		if !ok {
			t.Errorf("flow %d (%s) is not drawn", f.ID, f.Finding)
			continue
		}
		requireFlowDrawn(t, got, f, rules[f.ID], merged)
	}
	if want == 0 {
		t.Fatal("the report has no flow to draw")
	}
	if len(dom.Flows) != want {
		t.Errorf("%d flows drawn, want the report's %d", len(dom.Flows), want)
	}
	var found []string
	for _, x := range report.explanations {
		if !slices.Contains(found, x.Rule) {
			found = append(found, x.Rule)
		}
	}
	slices.Sort(found)
	overview := slices.Sorted(slices.Values(dom.Rules))
	if !slices.Equal(overview, found) {
		t.Errorf("the overview lists findings %q, want %q", overview, found)
	}
	t.Logf("page %q: %d flows drawn", dom.Title, len(dom.Flows))
}

// requireFlowDrawn requires a flow's section to draw what its JSON says.
func requireFlowDrawn(t *testing.T, got flowDOM, f output.JSONFlow, rule string, merged bool) {
	t.Helper()
	// A lifeline is named without its host (a node's name has no colon):
	// the host's box around it names that.
	lane := func(ns string) string {
		if _, name, ok := strings.Cut(ns, ":"); merged && ok {
			return name
		}
		return ns
	}
	var lanes, arrows, nat, lost []string
	add := func(s *[]string, v string) {
		if !slices.Contains(*s, v) {
			*s = append(*s, v)
		}
	}
	for _, p := range f.Packets {
		for k, s := range p.Steps {
			add(&lanes, lane(s.Netns))
			if k > 0 && p.Steps[k-1].Netns != s.Netns {
				add(&arrows, lane(p.Steps[k-1].Netns)+" -> "+lane(s.Netns))
			}
			if len(s.Translations) > 0 {
				add(&nat, lane(s.Netns)+": "+s.What)
			}
			if s.Lost {
				add(&lost, lane(s.Netns)+": "+s.What)
			}
		}
	}
	same := func(what string, got, want []string) {
		g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
		if !slices.Equal(slices.Compact(g), w) {
			t.Errorf("flow %d: %s drawn %q, want %q", f.ID, what, g, w)
		}
	}
	same("lifelines", got.Lanes, lanes)
	same("arrows", got.Arrows, arrows)
	same("NATs", got.NAT, nat)
	same("losses", got.Lost, lost)
	if got.Rule != rule {
		t.Errorf("flow %d: finding %q drawn, want %q", f.ID, got.Rule, rule)
	}
	if rule != "" && !strings.HasPrefix(got.Sentence, rule+": ") {
		t.Errorf("flow %d: sentence %q is not the finding %s's", f.ID, got.Sentence, rule)
	}
	if got.Height <= 0 {
		t.Errorf("flow %d: the diagram has no height in the browser", f.ID)
	}
}

// keepScreenshot checks a screenshot is a PNG, and keeps it as
// NETTRACE_SCREENSHOTS/NAME.png when that is set.
func keepScreenshot(t *testing.T, name string, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 200 || b.Dy() < 100 {
		t.Errorf("screenshot %v: too small to show a diagram", b)
	}
	dir := os.Getenv("NETTRACE_SCREENSHOTS")
	if dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
