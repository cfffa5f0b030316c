package flow

import (
	"testing"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestLossesAround(t *testing.T) {
	const s = 1_000_000_000
	var l Losses
	l.Add(event.LossWindow{From: 10 * s, To: 11 * s, N: 5}, 11*s)
	l.Add(event.LossWindow{From: 11 * s, To: 12 * s}, 12*s)
	l.Add(event.LossWindow{From: 20 * s, To: 21 * s, N: 2}, 21*s)
	if !l.Known(21*s) || l.Known(21*s+1) {
		t.Errorf("known through %d", l.through)
	}
	tests := []struct {
		start, ended uint64
		want         uint64
	}{
		{12 * s, 15 * s, 5},   // its lead (a second before it) meets the first window
		{13 * s, 19 * s, 0},   // between the windows
		{5 * s, 30 * s, 7},    // across both
		{21*s + 1, 25 * s, 2}, // began within its lead of the second
		{22*s + 1, 25 * s, 0}, // after every window
		{0, 10*s - 1, 0},      // ended before the first
	}
	for _, tt := range tests {
		if got := l.Around(&Flow{Start: tt.start, Ended: tt.ended}); got != tt.want {
			t.Errorf("flow %d..%d: %d lost around it, want %d", tt.start, tt.ended, got, tt.want)
		}
	}
	l.Complete()
	if !l.Known(^uint64(0)) {
		t.Error("a complete run leaves something unknown")
	}
}

// Past maxLossWindows the oldest windows merge: no loss is forgotten.
func TestLossesBounded(t *testing.T) {
	var l Losses
	for i := range uint64(maxLossWindows + 10) {
		l.Add(event.LossWindow{From: i * 10, To: i*10 + 1, N: 1}, i*10+1)
	}
	if len(l.windows) > maxLossWindows {
		t.Errorf("%d windows kept", len(l.windows))
	}
	if got := l.Around(&Flow{Start: lossLead, Ended: ^uint64(0)}); got != maxLossWindows+10 {
		t.Errorf("%d lost in all, want %d", got, maxLossWindows+10)
	}
}
