package output

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// Step says in a few words what one event did to its packet. The flow
// (nil when unknown) names the hook of the request's translation a
// reply's undoes.
func (n Names) Step(f *flow.Flow, e *event.Event) string {
	return event.ViewOf(e.Point).Step(n.lookup(), f, e)
}

// PacketEnd says where a packet's path ended.
func (n Names) PacketEnd(p *flow.Packet) string {
	last := p.Last()
	where := n.netns(last.Netns)
	if d := last.Ifname.String(); d != "" {
		where += "/" + d
	}
	on := "on " + where
	if where == "" && last.Point == event.PointDrop {
		// Freed where no namespace or device holds it (a closing socket's
		// queue): the place in the kernel says it.
		on = "at " + n.SymbolName(last.Drop.Location)
	}
	switch {
	case last.Point == event.PointDrop && n.ReasonName(last.Drop.Reason) == "NOT_SPECIFIED":
		return fmt.Sprintf("freed %s (the kernel gave no drop reason)", on)
	case last.Point == event.PointDrop:
		return fmt.Sprintf("dropped (%s) %s", n.ReasonName(last.Drop.Reason), on)
	case last.Point == event.PointSYN:
		return fmt.Sprintf("at the listener in %s: %s", n.netns(last.Netns), last.SYN.Outcome)
	case last.Point == event.PointNAT && last.Hook == event.HookInput:
		return "delivered locally in " + n.netns(last.Netns)
	case last.Point == event.PointDev && last.Kind == event.KindDevTx:
		return "sent out of " + where + ", not seen after"
	}
	return "last seen on " + where
}

// packetLabel is "SYN", "SYN-ACK", "ACK", ... for a TCP packet.
func packetLabel(t event.Tuple) string {
	if t.Proto != event.ProtoTCP {
		return event.ProtoName(t.Proto)
	}
	switch {
	case t.TCPFlags&0x02 != 0 && t.TCPFlags&0x10 != 0:
		return "SYN-ACK"
	case t.TCPFlags&0x02 != 0:
		return "SYN"
	case t.TCPFlags&0x04 != 0:
		return "RST"
	case t.TCPFlags&0x01 != 0:
		return "FIN"
	case t.TCPFlags&0x08 != 0:
		return "data"
	}
	return "ACK"
}
