// Command pageload opens an HTML page in headless Chromium ROUNDS times,
// each in a fresh tab, and prints the median time from the navigation to
// the load event and to the first frame painted after it: how long a
// reader waits for the page, without the browser's own start.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/chromedp/chromedp"
)

// timing is what the page's own clock says, in milliseconds from the
// navigation's start.
type timing struct {
	Load    float64 `json:"load"`
	Painted float64 `json:"painted"`
}

// timingScript waits for the frame after the load event and reads the
// navigation's timing.
const timingScript = `new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done({
	load: performance.getEntriesByType('navigation')[0].loadEventEnd,
	painted: performance.now(),
}))))`

func main() {
	rounds := flag.Int("rounds", 7, "times to open the page")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: pageload [-rounds N] PAGE.html")
		os.Exit(2)
	}
	page, err := filepath.Abs(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	loads, painted, err := measure(page, *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pageload:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: median of %d: load %.0f ms, painted %.0f ms (each: %.0f)\n", page, *rounds, median(loads), median(painted), painted)
}

// measure opens the page rounds times and returns each round's timing.
func measure(page string, rounds int) (loads, painted []float64, err error) {
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath("chromium"),
		chromedp.NoSandbox, chromedp.WindowSize(1400, 1000))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(browser); err != nil {
		return nil, nil, fmt.Errorf("start chromium: %w", err)
	}
	for range rounds {
		tab, cancelTab := chromedp.NewContext(browser)
		ctx, cancelTimeout := context.WithTimeout(tab, time.Minute)
		err := chromedp.Do(ctx, chromedp.Navigate("file://"+page))
		var t timing
		if err == nil {
			t, err = chromedp.Run(ctx, chromedp.Evaluate[timing](timingScript, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
		}
		cancelTimeout()
		cancelTab()
		if err != nil {
			return nil, nil, err
		}
		loads, painted = append(loads, t.Load), append(painted, t.Painted)
	}
	return loads, painted, nil
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}
