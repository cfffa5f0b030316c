package explain

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// noReply: a SYN was sent and retransmitted (or the connect gave up) with
// nothing coming back, and no rule before this one explains it.
func noReply(f *flow.Flow, n Names) *Finding {
	if hasReply(f) {
		return nil
	}
	syns, last := countSYNs(f)
	gaveUp := false
	for i := range f.Socket {
		e := &f.Socket[i]
		if e.Point == event.PointTCP && e.Kind == event.KindTCPState && e.TCP.OldState == 2 /* SYN_SENT */ && e.TCP.NewState == 7 /* CLOSE */ {
			gaveUp = true
		}
	}
	if last == nil || (syns < 2 && !gaveUp) {
		return nil
	}
	t := packetTuple(last)
	summary := fmt.Sprintf("SYN %s -> %s was sent %d times and nothing came back; it was last seen on %s (%s %s)",
		src(f.Tuple()), dst(f.Tuple()), syns, where(n, last), last.Point, lastStep(last))
	if t != f.Tuple() && (t.Dst != f.Tuple().Dst || t.Dport != f.Tuple().Dport) {
		summary += fmt.Sprintf(", addressed to %s", dst(t))
	}
	return &Finding{
		Summary:  summary + ".",
		Evidence: []Evidence{evidence(n, last, "SYN last seen on %s", where(n, last))},
	}
}

func lastStep(e *event.Event) string {
	if e.Hook != event.HookNone {
		return e.Hook.String()
	}
	return e.Kind.String()
}
