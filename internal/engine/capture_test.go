package engine

import (
	"io"
	"maps"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// recordSource hands out kernel records, then says the ring buffer is
// closed.
type recordSource struct {
	records [][]byte
	lost    uint64
}

func (s *recordSource) SetDeadline(time.Time) {}
func (s *recordSource) Flush() error          { return nil }
func (s *recordSource) Wake()                 {}
func (s *recordSource) Undelivered() (uint64, error) {
	return s.lost, nil
}

func (s *recordSource) ReadInto(rec *ringbuf.Record) error {
	if len(s.records) == 0 {
		return ringbuf.ErrClosed
	}
	rec.RawSample, s.records = s.records[0], s.records[1:]
	return nil
}

// countingWatcher completes and observes events, and judges nothing.
type countingWatcher struct{ completed, observed, expired int }

func (w *countingWatcher) Complete(*event.Event)                    { w.completed++ }
func (w *countingWatcher) Observe(*event.Event, func(*event.Event)) { w.observed++ }
func (w *countingWatcher) Expire(uint64, bool, func(*event.Event))  { w.expired++ }

// kernelRecords writes events as the kernel would: the steps of one IPv4
// packet, one after the other, as one record (a journey), across NAT's
// translations of a TCP or UDP packet.
func kernelRecords(events []event.Event) (records [][]byte, journeys int) {
	for i := 0; i < len(events); {
		n := 1
		for i+n < len(events) && n <= journeyHops && sameJourney(&events[i], &events[i+n]) {
			n++
		}
		if n > 1 {
			records = append(records, event.AppendKernelJourney(nil, events[i:i+n]))
			journeys++
		} else {
			b := make([]byte, event.RecordSize+event.MaxIPv6Block+len(events[i].Packet))
			records = append(records, b[:event.Encode(&events[i], b)])
		}
		i += n
	}
	return records, journeys
}

// journeyHops is the kernel's NT_JOURNEY_HOPS.
const journeyHops = 24

func sameJourney(head, e *event.Event) bool {
	steps := func(p event.Point) bool {
		return p == event.PointDev || p == event.PointNAT || p == event.PointRoute || p == event.PointVXLAN
	}
	translated := func(from event.Tuple) bool {
		return e.Tuple == from || e.Tuple.Proto == from.Proto && e.Tuple.TCPFlags == from.TCPFlags &&
			(e.Tuple.Proto == event.ProtoTCP || e.Tuple.Proto == event.ProtoUDP)
	}
	var same bool
	switch none := (event.Tuple{}); {
	case e.Inner == head.Inner:
		same = e.Tuple == head.Tuple || e.Inner == none && translated(head.Tuple)
	case e.Inner == none:
		same = translated(head.Inner) // decapsulated
	}
	// A step with bytes starts a journey of its own after a head without.
	withBytes := len(e.Packet) > 0 && len(head.Packet) == 0
	return steps(head.Point) && steps(e.Point) && !withBytes && head.Skb != 0 && head.Tuple.Src.Is4() && e.Tuple.Src.Is4() &&
		e.Skb == head.Skb && e.SkbSeen == head.SkbSeen && same
}

// A capture hands every record read, completed, to the pipeline and the
// judge, and finds what the same events fed to a pipeline directly find.
// A stop signal still lets it drain what the ring buffer holds.
func TestCaptureReadsEveryRecord(t *testing.T) {
	events := incidentStream(20)
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	direct := New(Options{Format: "json", Stdout: io.Discard, Names: names})
	for i := range events {
		direct.Event(&events[i])
	}
	want := direct.Finish(nil, nil, 0)
	if len(want.Findings) == 0 {
		t.Fatal("the incidents gave no finding: the test shows nothing")
	}

	for _, stopped := range []bool{false, true} {
		w := &countingWatcher{}
		p := New(Options{Format: "json", Stdout: io.Discard, Names: names, Losses: &flow.Losses{}})
		stop := make(chan os.Signal, 1)
		var told []os.Signal
		records, journeys := kernelRecords(events)
		if journeys == 0 {
			t.Fatal("no record carries a journey: the test shows nothing of them")
		}
		c := &Capture{Source: &recordSource{records: records}, Completer: w, Judge: w, Pipeline: p,
			Stop: stop, Stopping: func(s os.Signal) { told = append(told, s) }}
		if stopped {
			stop <- syscall.SIGTERM
		}
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		c.CountLosses()
		got := p.Finish(nil, nil, 0)
		if w.completed != len(events) || w.observed != len(events) || w.expired == 0 {
			t.Errorf("stopped %v: %d events; completed %d, observed %d, expired %d times", stopped, len(events), w.completed, w.observed, w.expired)
		}
		if p.Progress().Events != uint64(len(events)) {
			t.Errorf("stopped %v: pipeline took %d events of %d", stopped, p.Progress().Events, len(events))
		}
		if !maps.Equal(got.Findings, want.Findings) {
			t.Errorf("stopped %v: findings %v, fed directly %v", stopped, got.Findings, want.Findings)
		}
		if stopped != (len(told) == 1) {
			t.Errorf("stopped %v: told of %v", stopped, told)
		}
	}
}

// A quiet reader waits an idle tick, never past the run's deadline, and a
// record read brings the tick back.
func TestNextTick(t *testing.T) {
	at := time.Unix(1000, 0)
	for _, c := range []struct {
		name                 string
		lastRecord, deadline time.Time
		want                 time.Time
	}{
		{"records coming", at.Add(-tick), time.Time{}, at.Add(tick)},
		{"quiet for less than idleAfter", at.Add(-idleAfter + time.Millisecond), time.Time{}, at.Add(tick)},
		{"quiet", at.Add(-idleAfter), time.Time{}, at.Add(idleTick)},
		{"quiet, deadline first", at.Add(-idleAfter), at.Add(idleTick / 2), at.Add(idleTick / 2)},
		{"deadline before the tick", at, at.Add(tick / 2), at.Add(tick / 2)},
	} {
		if got := nextTick(at, c.lastRecord, c.deadline); !got.Equal(c.want) {
			t.Errorf("%s: next tick %v after the last, want %v", c.name, got.Sub(at), c.want.Sub(at))
		}
	}
}
