package flow

import (
	"sort"
	"sync"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// lossLead is how long before a flow's first record a lost record may
// still have been its own: a SYN retransmitted after 1 s was seen, the
// first one lost.
const lossLead = 1_000_000_000

// maxLossWindows bounds the windows kept: past it the two oldest become
// one, which can only mark more flows incomplete, never fewer.
const maxLossWindows = 4096

// Losses are the loss windows of a run and how far they are known: a
// flow's completeness is decided only once every loss that could have
// touched it has been counted. Safe for concurrent use: a live run counts
// losses on a goroutine of its own.
type Losses struct {
	mu      sync.Mutex
	windows []event.LossWindow // in order of To
	through uint64
}

// Add counts a window's losses and says that every loss before through is
// now counted.
func (l *Losses) Add(w event.LossWindow, through uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Windows are kept as counted, never joined as they come: replay then
	// marks each flow as the live run did.
	if w.N > 0 {
		l.windows = append(l.windows, w)
		if len(l.windows) > maxLossWindows {
			l.windows[1].From, l.windows[1].N = l.windows[0].From, l.windows[0].N+l.windows[1].N
			l.windows = append(l.windows[:0], l.windows[1:]...)
		}
	}
	l.through = max(l.through, through)
}

// Complete says every loss is counted: the run is over.
func (l *Losses) Complete() { l.Add(event.LossWindow{}, ^uint64(0)) }

// Known says whether every loss up to kernel time t is counted.
func (l *Losses) Known(t uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return t <= l.through
}

// Around returns how many records were lost while a flow was open (from
// lossLead before its first record to its end): 0 means it is complete. A
// window counted from the flow's end on is not its own: its losses came
// after every loss the flow's release waited for.
func (l *Losses) Around(f *Flow) uint64 {
	from := f.Start - min(f.Start, lossLead)
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.windows), func(i int) bool { return l.windows[i].To >= from })
	var n uint64
	for ; i < len(l.windows) && l.windows[i].From < f.Ended; i++ {
		n += l.windows[i].N
	}
	return n
}
