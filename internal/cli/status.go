package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nettrace-dev/nettrace/internal/engine"
	"github.com/nettrace-dev/nettrace/internal/probe"
)

// statusLine is the line watch keeps at the bottom of a terminal, so that
// during a long run without a finished flow the user sees it working:
// events a second, flows open, findings so far, events lost. It is drawn
// over itself on stderr, and cleared before anything else is written to
// the terminal and at exit; it exists only when stderr is a terminal.
type statusLine struct {
	mu    sync.Mutex
	w     io.Writer
	shown bool
}

// clearLine returns the cursor to the line's start and erases the line.
const clearLine = "\r\x1b[K"

// show draws the line.
func (s *statusLine) show(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(s.w, clearLine+text)
	s.shown = true
}

// clear erases the line, for good or until the next show.
func (s *statusLine) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
}

func (s *statusLine) clearLocked() {
	if s.shown {
		fmt.Fprint(s.w, clearLine)
		s.shown = false
	}
}

// around runs write with the line erased, so that what write puts on the
// terminal does not run into it; the next show draws it again.
func (s *statusLine) around(write func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	write()
}

// statusText is what the line says.
func statusText(eventsPerSecond float64, open int, findings, lost uint64, since time.Duration) string {
	return fmt.Sprintf("nettrace: %s, %.0f events/s, %d flows open, %d findings, %d events lost",
		since.Round(time.Second), eventsPerSecond, open, findings, lost)
}

// statusGuard writes to a terminal the status line is also on.
type statusGuard struct {
	w      io.Writer
	status *statusLine
}

func (g statusGuard) Write(b []byte) (n int, err error) {
	g.status.around(func() { n, err = g.w.Write(b) })
	return n, err
}

// statusEvery is how often the status line is redrawn.
const statusEvery = time.Second

// statusRefresh redraws the status line from the pipeline's progress and
// the tracer's losses, when it is due.
type statusRefresh struct {
	line      *statusLine
	tr        *probe.Tracer
	p         *engine.Pipeline
	at, start time.Time
	eventsAt  uint64
}

func (r *statusRefresh) refresh() {
	now := time.Now()
	if r.start.IsZero() {
		r.start, r.at = now, now
		return
	}
	elapsed := now.Sub(r.at)
	if elapsed < statusEvery {
		return
	}
	var lost uint64
	if perPoint, err := r.tr.Lost(); err == nil {
		for _, n := range perPoint {
			lost += n
		}
	}
	pr := r.p.Progress()
	rate := float64(pr.Events-r.eventsAt) / elapsed.Seconds()
	r.line.show(statusText(rate, pr.Open, pr.Findings, lost, now.Sub(r.start)))
	r.at, r.eventsAt = now, pr.Events
}
