// Package output renders events for people (one aligned line each), for
// programs (JSON lines with a "type" field; see docs/events.md) and for
// packet tools (pcapng, with nettrace's facts as packet comments). What
// each point's payload says comes from the point's own view (event.ViewOf).
package output

import (
	"fmt"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// Names turns kernel numbers into names, and kernel times into wall-clock
// time, for the renderers; each may be nil.
type Names struct {
	DropReason func(uint32) string
	Symbol     func(uint64) string
	Netns      func(uint32) string
	// Host names the host a namespace is on, where flows cross hosts (a
	// replay of several recordings); nil where they do not.
	Host func(uint32) string
	// Wall converts a CLOCK_MONOTONIC timestamp to wall-clock time.
	Wall func(uint64) time.Time
}

// lookup is what the points' views need of the names.
func (n Names) lookup() event.Lookup {
	return event.Lookup{DropReason: n.DropReason, Symbol: n.Symbol}
}

func (n Names) netns(ino uint32) string {
	if n.Netns != nil {
		return n.Netns(ino)
	}
	if ino == 0 {
		return ""
	}
	return fmt.Sprintf("netns:%d", ino)
}

// NetnsName names a namespace inode.
func (n Names) NetnsName(ino uint32) string { return n.netns(ino) }

// ReasonName names a drop reason.
func (n Names) ReasonName(r uint32) string { return n.lookup().ReasonName(r) }

func (n Names) wall(ts uint64) time.Time {
	if n.Wall != nil {
		return n.Wall(ts)
	}
	return time.Unix(0, int64(ts))
}

// Writer renders events, and flows with their report (their finding and
// what their steps mean).
type Writer interface {
	Event(e *event.Event) error
	Flow(f *flow.Flow, r *explain.Report) error
}

// Summary is what a run saw, per point, and what it lost.
type Summary struct {
	Events map[event.Point]uint64
	// Records counts the kernel records the events came in (live runs
	// only): a record may carry a packet's several device hops.
	Records uint64
	Lost    map[event.Point]uint64
	// Shed are the records not sent to keep room in a filling ring buffer
	// for evidence (probe.Tracer.Shed).
	Shed     map[event.Point]uint64
	Duration time.Duration
	Flows    flow.Stats
	// Incomplete counts the flows records were lost or shed around.
	Incomplete uint64
	Findings   map[string]uint64 // per rule
	// Clocks are how a replay of several recordings placed each one's
	// clock against the first's (trace.NewAlignedStream); nil otherwise.
	Clocks []trace.ClockSkew
	// Gate is what the kernel gate did (--healthy count); nil without it.
	Gate *event.GateCounts
}

// SymbolName names a kernel address.
func (n Names) SymbolName(addr uint64) string { return n.lookup().SymbolName(addr) }

// Outcome says where a flow ended: a brief timeline's line says it, and
// the page counts the flows it does not draw by it.
func Outcome(r *explain.Report) string {
	last := &r.Packets[len(r.Packets)-1]
	if last.Ordinary != "" {
		return last.Ordinary
	}
	return last.End
}
