package explain

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// noReply: a SYN was sent and retransmitted (or the connect gave up) with
// nothing coming back, and no rule before this one explains it.
func noReply(f *flow.Flow, n Context) *Finding {
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
	t := last.Current()
	fd := &Finding{
		Evidence:       []Evidence{evidence(n, last, "SYN last seen %s", lastSeen(n, f, last))},
		restsOnAbsence: true,
	}
	fd.Summary = fmt.Sprintf("SYN %s -> %s was sent %d times and nothing came back; it was last seen %s",
		fd.atPod(n, src(f.Tuple())), fd.atPod(n, dst(f.Tuple())), syns, lastSeen(n, f, last))
	if t != f.Tuple() && (t.Dst != f.Tuple().Dst || t.Dport != f.Tuple().Dport) {
		fd.Summary += fmt.Sprintf(", addressed to %s", fd.atPod(n, dst(t)))
	}
	fd.Summary += "."
	return fd
}

// lastSeen says where and how a packet was last seen: "on n1/eth0 (dev
// tx)". A drop past the devices (a socket's, in TCP's receive path) has
// no device and often no namespace of its own: its packet's earlier
// steps say where it was.
func lastSeen(n Context, f *flow.Flow, last *event.Event) string {
	if last.Point != event.PointDrop {
		return fmt.Sprintf("on %s (%s %s)", where(n, last), last.Point, lastStep(last))
	}
	at := fmt.Sprintf("dropped (%s at %s)", n.ReasonName(last.Drop.Reason), n.SymbolName(last.Drop.Location))
	if w := where(n, last); w != "" && last.Ifname.String() != "" {
		return at + " on " + w
	}
	if before := placeBefore(f, last); before != nil {
		return fmt.Sprintf("%s in %s, past its devices (last: %s)", at, n.NetnsName(before.Netns), where(n, before))
	}
	return at + ", past its devices"
}

// placeBefore returns the last event with a device before e in e's
// packet.
func placeBefore(f *flow.Flow, e *event.Event) *event.Event {
	for _, p := range f.Packets {
		var found *event.Event
		for i := range p.Events {
			c := &p.Events[i]
			if c == e {
				return found
			}
			if c.Ifname.String() != "" {
				found = c
			}
		}
	}
	return nil
}

func lastStep(e *event.Event) string {
	if e.Hook != event.HookNone {
		return e.Hook.String()
	}
	return e.Kind.String()
}
