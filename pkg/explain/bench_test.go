package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// BenchmarkDecodeCorrelateExplain is nettrace's user-space hot path per
// event: a kernel record decoded, correlated, and its flow explained when
// it ends. The records are the five incidents and their healthy twins,
// repeated as distinct connections.
func BenchmarkDecodeCorrelateExplain(b *testing.B) {
	benchPipeline(b, func(f *flow.Flow) bool { return Explain(f, fixture.Context{}) != nil })
}

// BenchmarkDecodeCorrelate is the same without the rules.
func BenchmarkDecodeCorrelate(b *testing.B) {
	benchPipeline(b, func(f *flow.Flow) bool { return len(f.Packets) == 0 })
}

func benchRecords() [][]byte {
	var seqs [][]event.Event
	for _, healthy := range []bool{false, true} {
		seqs = append(seqs, fixture.SNATMissing(healthy), fixture.SYNOverflow(healthy), fixture.StaleHostPort(healthy), fixture.Hairpin(healthy))
	}
	var records [][]byte
	for c := 0; c < 512; c++ {
		for _, seq := range seqs {
			for _, e := range seq {
				fixture.Repeat(&e, c, 200_000)
				// The bytes a live event carries: every TCP event's packet
				// is fingerprinted and its SYNs' sequence numbers read.
				fixture.Snapshot(&e, uint16(e.Skb), uint32(e.Skb))
				buf := make([]byte, event.RecordedLen(&e))
				records = append(records, buf[:event.Encode(&e, buf)])
			}
		}
	}
	return records
}

func benchPipeline(b *testing.B, judge func(*flow.Flow) bool) {
	records := benchRecords()
	c := flow.New(flow.DefaultConfig)
	findings := 0
	done := func(f *flow.Flow) {
		if judge(f) {
			findings++
		}
	}
	var e event.Event
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := event.Decode(records[i%len(records)], &e); err != nil {
			b.Fatal(err)
		}
		e.Time += uint64(i/len(records)) * 1e10 // later laps are later in time
		c.Add(&e, done)
		if i%4096 == 0 {
			c.Expire(e.Time, done)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// reportFlows are the five incidents' flows and their twins', finished.
func reportFlows() []*flow.Flow {
	var flows []*flow.Flow
	c := flow.New(flow.DefaultConfig)
	done := func(f *flow.Flow) {
		if len(f.Packets) > 0 {
			flows = append(flows, f.Clone())
		}
	}
	for _, healthy := range []bool{false, true} {
		for _, seq := range [][]event.Event{fixture.SNATMissing(healthy), fixture.SYNOverflow(healthy), fixture.StaleHostPort(healthy), fixture.Hairpin(healthy)} {
			for i := range seq {
				c.Add(&seq[i], done)
			}
		}
	}
	c.Flush(done)
	return flows
}

// BenchmarkReport is what every finished flow costs beyond its events: its
// report, with its packets' directions, labels and ends.
func BenchmarkReport(b *testing.B) {
	benchReport(b, Detail{})
}

// BenchmarkReportSteps is a report for a flow shown whole: every step's
// words too.
func BenchmarkReportSteps(b *testing.B) {
	benchReport(b, Detail{Steps: AllFlows})
}

func benchReport(b *testing.B, d Detail) {
	flows := reportFlows()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		NewReport(flows[i%len(flows)], fixture.Context{}, d)
	}
}
