package cli

import (
	"fmt"
	"io"
	"sync"
	"time"
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
