package flow

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

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
			fixture.Snapshot(&e, uint16(e.Skb), uint32(e.Skb))
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

// BenchmarkMillionFlows measures the memory of one million concurrent
// flows (one SYN each, none ending): the bound --max-flows sets.
func BenchmarkMillionFlows(b *testing.B) {
	const flows = 1_000_000
	base := fixture.T("10.0.0.1:40000", "10.0.0.2:80", fixture.SYN)
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := New(Config{Idle: time.Hour, MaxFlows: flows})
		var s fixture.Seq
		for n := 0; n < flows; n++ {
			t := base
			t.Src = netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)})
			e := fixture.Dev(&s, uint64(n+1)<<8, "n1/eth0", event.KindDevTx, t)
			c.Add(&e, func(*Flow) { b.Fatal("no flow should end") })
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.Stats().Active != flows {
			b.Fatalf("%d flows active", c.Stats().Active)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/flows, "bytes/flow")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
		runtime.KeepAlive(c)
	}
}
