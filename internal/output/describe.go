package output

import (
	"fmt"
	"strconv"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

func addrPort(t event.Tuple, source bool) string {
	var b [64]byte
	if source {
		return string(appendAddrPort(b[:0], t.Src, t.Sport))
	}
	return string(appendAddrPort(b[:0], t.Dst, t.Dport))
}

// Step says in a few words what one event did to its packet.
func (n Names) Step(e *event.Event) string {
	switch e.Point {
	case event.PointNAT:
		if e.Flags&event.FlagPre == 0 {
			return "NAT hook (state before unknown)"
		}
		pre, post := e.NAT.Pre, e.Tuple
		dnat := pre.Dst != post.Dst || pre.Dport != post.Dport
		snat := pre.Src != post.Src || pre.Sport != post.Sport
		if !dnat && !snat {
			return "no NAT"
		}
		s := ""
		if dnat {
			s = "DNAT " + addrPort(pre, false) + " -> " + addrPort(post, false)
		}
		if snat {
			if s != "" {
				s += ", "
			}
			s += "SNAT " + addrPort(pre, true) + " -> " + addrPort(post, true)
		}
		if out := e.NAT.OutIfname.String(); out != "" && (e.Hook == event.HookOutput || e.Hook == event.HookPrerouting) {
			s += ", route via " + out
		}
		return s
	case event.PointRoute:
		s := "route via " + e.Route.OifName.String()
		if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
			s += " gw " + g.String()
		}
		if e.Route.Err != 0 {
			s += fmt.Sprintf(" (error %d)", e.Route.Err)
		}
		return s
	case event.PointVXLAN:
		if e.Kind == event.KindVXLANEnter {
			return "into vxlan device"
		}
		return "vxlan VNI " + strconv.FormatUint(uint64(e.VXLAN.VNI), 10) + " " + e.VXLAN.Local.String() + " -> VTEP " + e.VXLAN.Remote.String()
	case event.PointSYN:
		s := fmt.Sprintf("listener %s: %s", e.SYN.Listener, e.SYN.Outcome)
		if e.SYN.AcceptMax > 0 {
			s += fmt.Sprintf(" (accept queue %d/%d)", e.SYN.AcceptQueue, e.SYN.AcceptMax)
		}
		return s
	case event.PointDrop:
		return "DROPPED " + n.dropReason(e.Drop.Reason) + " at " + n.symbol(e.Drop.Location)
	case event.PointDev:
		return e.Kind.String()
	case event.PointTCP:
		switch e.Kind {
		case event.KindTCPState:
			return event.TCPStateName(e.TCP.OldState) + " -> " + event.TCPStateName(e.TCP.NewState)
		case event.KindResetSent:
			return "reset sent"
		case event.KindResetReceived:
			return "reset received"
		case event.KindSynAckRetransmit:
			return "SYN-ACK retransmitted"
		}
	}
	return e.Kind.String()
}

// PacketEnd says where a packet's path ended.
func (n Names) PacketEnd(p *flow.Packet) string {
	last := p.Last()
	where := n.netns(last.Netns)
	if d := last.Ifname.String(); d != "" {
		where += "/" + d
	}
	switch {
	case last.Point == event.PointDrop && n.dropReason(last.Drop.Reason) == "NOT_SPECIFIED":
		return fmt.Sprintf("freed on %s (the kernel gave no drop reason)", where)
	case last.Point == event.PointDrop:
		return fmt.Sprintf("dropped (%s) on %s", n.dropReason(last.Drop.Reason), where)
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

// requestTuple is a packet's tuple where it was first seen.
func firstTuple(p *flow.Packet) event.Tuple {
	e := p.Head()
	if e.HasInner() {
		return e.Inner
	}
	if e.Point == event.PointNAT && e.Flags&event.FlagPre != 0 {
		return e.NAT.Pre
	}
	return e.Tuple
}
