package engine

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"github.com/rs/zerolog"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Source is where a live capture reads the kernel's records: the tracer's
// ring buffer, and its count of records lost or shed.
type Source interface {
	SetDeadline(t time.Time)
	ReadInto(rec *ringbuf.Record) error
	Undelivered() (uint64, error)
	// Flush has the kernel send what it holds back for a while (a packet's
	// device hops gathered into one record), so that every record made
	// before it is in the ring buffer or counted lost.
	Flush() error
	// Wake interrupts a read waiting for records.
	Wake()
}

// Completer adds to a kernel event what only user space knows (the syn
// point's listener queues) before the pipeline sees it.
type Completer interface {
	Complete(e *event.Event)
}

// Completers complete an event each in turn.
type Completers []Completer

// Complete hands the event to every completer.
func (cs Completers) Complete(e *event.Event) {
	for _, c := range cs {
		c.Complete(e)
	}
}

// Judge decides outcomes the kernel reports no event for, from the events
// it observes and on a clock, and emits them as events of its own. Expire
// is given the kernel time up to which events were read: a judgement that
// waits for an answer must wait on the events, not on the reader, which a
// busy ring buffer holds seconds behind.
type Judge interface {
	Observe(e *event.Event, emit func(*event.Event))
	Expire(readTo uint64, final bool, emit func(*event.Event))
}

// Capture is one live run's read loop. It runs on one goroutine (and one
// that wakes it on a stop signal): the ring buffer read wakes at least
// every tick, or idle tick, for the periodic work (stop
// conditions, judgements on a clock, idle flows, new namespaces, flushing
// the recording, the status).
type Capture struct {
	Source    Source
	Completer Completer // nil: none
	Judge     Judge     // nil: none
	Pipeline  *Pipeline
	Duration  time.Duration // 0: until stopped
	// Stop ends the run (what is in the ring buffer is still read);
	// Stopping is told why first.
	Stop     <-chan os.Signal
	Stopping func(os.Signal)
	// Rescan, when set, looks for new namespaces about once a second;
	// Progress, when set, is called every tick (a status line).
	Rescan   func()
	Progress func()
	Log      zerolog.Logger

	// undelivered is the kernel's count of records lost or shed at the
	// last count, made at kernel time counted (less lossSlack).
	undelivered uint64
	counted     uint64
	lastJudged  time.Time
	stop        <-chan os.Signal // Stop, forwarded by watchStop
	// translated holds the packet bytes of the hop being handed on, when
	// a translation since its journey's start rewrote them.
	translated []byte
}

// lossSlack is how long a record may take from its timestamp to being
// counted lost: a count at kernel time t covers the losses before
// t-lossSlack for sure.
const lossSlack = 50 * time.Millisecond

// clockEvery is how many records a busy reader takes between readings of
// the clock: well under a millisecond's worth at the rates where it
// matters.
const clockEvery = 64

// tick is how often the periodic work runs while records come, and the
// longest a record waits in a quiet ring buffer then: the kernel wakes the
// reader only as records pile up (nt_wakeup), so a quiet reader reads on
// this clock.
const tick = 100 * time.Millisecond

// idleTick is the tick once idleAfter has passed with no record read: an
// idle node pays the periodic work (a flush on every CPU, the loss
// counters' reads, the garbage) once a second, not ten times, which was
// most of an idle recorder's 1.1 % of a core. The first records after a
// quiet second wait for it (at most idleTick); the next record read brings
// tick back; a stop signal wakes the reader at once.
const (
	idleTick  = time.Second
	idleAfter = time.Second
)

// CountLosses reads the kernel's loss counters and tells the pipeline
// which window lost how many records, and how far losses are counted.
func (c *Capture) CountLosses() {
	now := kernel.MonotonicNow()
	// The records held back before now are sent or counted lost first:
	// a count at now must cover them.
	err := c.Source.Flush()
	var n uint64
	if err == nil {
		n, err = c.Source.Undelivered()
	}
	if err != nil {
		// Nothing is counted: every flow from now on waits for the count
		// at the end, which stays as conservative as the run can be.
		c.Log.Debug().Err(err).Msg("records lost not counted")
		return
	}
	through := now - min(now, uint64(lossSlack))
	c.Pipeline.LossesCounted(event.LossWindow{From: c.counted, To: now, N: n - c.undelivered}, through)
	c.undelivered, c.counted = n, through
}

// Run reads until stopped, the duration is over or the pipeline's event
// limit is reached, then drains the ring buffer.
func (c *Capture) Run() error {
	// The clock is read when the ring buffer is drained, and every
	// clockEvery records while it is not: at a busy node's rates, reading
	// it per record was 4 % of nettrace's time on this kind of VM.
	now := time.Now()
	unclocked := 0
	var deadline time.Time
	if c.Duration > 0 {
		deadline = now.Add(c.Duration)
	}
	var rec ringbuf.Record
	var ev event.Event
	lastRescan, lastTick, lastRecord, readBy := now, now, now, time.Time{}
	c.lastJudged = now
	// A signal sent before the run is taken here, before watchStop
	// competes for it: a run that drains a closed source at once would
	// otherwise end without having seen it.
	stopping := c.stopDue(now, deadline)
	done := make(chan struct{})
	defer close(done)
	c.stop = c.watchStop(done)
	for flushed := false; ; {
		if !stopping {
			stopping = c.stopDue(now, deadline)
		}
		if stopping && !flushed {
			// What the kernel holds back joins the drain.
			if err := c.Source.Flush(); err != nil {
				c.Log.Warn().Err(err).Msg("records held in the kernel not sent")
			}
			flushed = true
		}
		if stopping {
			// Drain what is already in the ring buffer, then stop.
			c.Source.SetDeadline(now)
		} else if next := nextTick(lastTick, lastRecord, deadline); next != readBy {
			readBy = next
			c.Source.SetDeadline(readBy)
		}
		err := c.Source.ReadInto(&rec)
		if unclocked++; err != nil || rec.Remaining == 0 || unclocked == clockEvery {
			now, unclocked = time.Now(), 0
		}
		switch {
		case err == nil:
			lastRecord = now
			if err := c.takeRecord(rec.RawSample, &ev, now, &lastTick); err != nil {
				return err
			}
			continue
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrFlushed):
		case errors.Is(err, ringbuf.ErrClosed):
			stopping = true
		default:
			return fmt.Errorf("read ring buffer: %w", err)
		}
		if stopping {
			c.judge(now, true)
			return c.Pipeline.err
		}
		c.periodic(c.judge(now, false))
		lastTick = now
		if c.Rescan != nil && now.Sub(lastRescan) > time.Second {
			c.Rescan()
			lastRescan = now
		}
	}
}

// takeRecord hands on the events of one ring buffer record, read at now
// (ev is scratch), and does the periodic work when a tick has passed since
// lastTick: flows end, held events expire and the recording is flushed on
// a clock even while records keep coming, at the kernel time of the event
// just read, not the clock's (the ring buffer may hold seconds of later
// events, and a flow idle by the clock may have its next events there).
func (c *Capture) takeRecord(b []byte, ev *event.Event, now time.Time, lastTick *time.Time) error {
	if err := event.DecodeKernel(b, ev); err != nil {
		c.Log.Warn().Err(err).Msg("undecodable record")
		return nil
	}
	c.Pipeline.KernelRecord()
	c.take(ev, now)
	c.takeHops(b, ev, now)
	if now.Sub(*lastTick) >= tick {
		c.periodic(ev.Time)
		*lastTick = now
	}
	return c.Pipeline.err
}

// nextTick is when a read waiting for records gives up for the periodic
// work: a tick after the last, an idle tick once records stopped coming,
// and never past the run's deadline.
func nextTick(lastTick, lastRecord, deadline time.Time) time.Time {
	next := lastTick.Add(tick)
	if lastTick.Sub(lastRecord) >= idleAfter {
		next = lastTick.Add(idleTick)
	}
	if !deadline.IsZero() && deadline.Before(next) {
		return deadline
	}
	return next
}

// watchStop forwards a stop signal and wakes the read that may be waiting
// a whole idle tick for records, until done.
func (c *Capture) watchStop(done <-chan struct{}) <-chan os.Signal {
	stop := make(chan os.Signal, 1)
	go func() {
		select {
		case s := <-c.Stop:
			stop <- s
			c.Source.Wake()
		case <-done:
		}
	}()
	return stop
}

// judge has the judge decide, at now, when the ring buffer was found
// empty: every event until the kernel's time now was read, which it
// returns. final judges everything pending.
func (c *Capture) judge(now time.Time, final bool) uint64 {
	readTo := kernel.MonotonicNow()
	if c.Judge != nil {
		c.Judge.Expire(readTo, final, c.Pipeline.Event)
		c.lastJudged = now
	}
	return readTo
}

// stopDue says whether the run is to stop at now: a signal, the duration
// over or the event limit reached.
// The signal is taken as watchStop forwards it, or from Stop itself
// before watchStop runs (c.stop is nil then, and blocks the select).
func (c *Capture) stopDue(now, deadline time.Time) bool {
	var s os.Signal
	select {
	case s = <-c.stop:
	case s = <-c.Stop:
	default:
		return (!deadline.IsZero() && now.After(deadline)) || c.Pipeline.Full()
	}
	if c.Stopping != nil {
		c.Stopping(s)
	}
	return true
}

// take hands one kernel event, completed, to the pipeline, and to the
// judge, read at now.
func (c *Capture) take(ev *event.Event, now time.Time) {
	if c.Completer != nil {
		c.Completer.Complete(ev)
	}
	c.Pipeline.Event(ev)
	if c.Judge == nil {
		return
	}
	c.Judge.Observe(ev, c.Pipeline.Event)
	// Judged on a clock: a busy ring buffer is never idle.
	if now.Sub(c.lastJudged) >= tick {
		c.Judge.Expire(ev.Time, false, c.Pipeline.Event)
		c.lastJudged = now
	}
}

// takeHops hands on the events that follow a record's own (a packet's
// next steps, which the kernel gathered into it); ev is scratch.
func (c *Capture) takeHops(b []byte, ev *event.Event, now time.Time) {
	for i := range event.KernelHops(b) {
		c.translated = event.DecodeKernelHop(b, i, ev, c.translated)
		c.take(ev, now)
	}
}

// periodic is a tick's work at kernel time now.
func (c *Capture) periodic(now uint64) {
	c.CountLosses()
	c.Pipeline.Tick(now)
	if c.Progress != nil {
		c.Progress()
	}
}
