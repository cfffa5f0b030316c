package flow

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// benchEvents is many connections shaped like incident 1 (12 events each),
// with distinct ports, skbs and conntrack entries.
func benchEvents(conns int) []event.Event {
	base := fixture.SNATMissing(false)
	out := make([]event.Event, 0, conns*len(base))
	for c := 0; c < conns; c++ {
		for _, e := range base {
			fixture.Repeat(&e, c, 200_000)
			out = append(out, e)
		}
	}
	return out
}

// BenchmarkCorrelate measures correlation per event; b.N events.
func BenchmarkCorrelate(b *testing.B) {
	events := benchEvents(4096)
	c := New(DefaultConfig)
	flows := 0
	done := func(*Flow) { flows++ }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := &events[i%len(events)]
		// Later laps are later in time: flows of an earlier lap end.
		lap := uint64(i / len(events))
		t := e.Time
		e.Time += lap * 1e10
		c.Add(e, done)
		e.Time = t
		if i%4096 == 0 {
			c.Expire(e.Time+lap*1e10, done)
		}
	}
}
