package output

import (
	"fmt"
	"strconv"
	"strings"

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

// Step says in a few words what one event did to its packet. The flow
// (nil when unknown) names the hook of the request's translation a
// reply's undoes.
func (n Names) Step(f *flow.Flow, e *event.Event) string {
	switch e.Point {
	case event.PointNAT:
		if e.Flags&event.FlagPre == 0 {
			return "NAT hook (state before unknown)"
		}
		pre, post := e.NAT.Pre, e.Tuple
		var parts []string
		for _, t := range []event.Translation{event.TranslationDNAT, event.TranslationSNAT, event.TranslationUnDNAT, event.TranslationUnSNAT} {
			if e.Translation()&t == 0 {
				continue
			}
			switch t {
			case event.TranslationDNAT:
				parts = append(parts, "DNAT "+addrPort(pre, false)+" -> "+addrPort(post, false))
			case event.TranslationSNAT:
				parts = append(parts, "SNAT "+addrPort(pre, true)+" -> "+addrPort(post, true))
			case event.TranslationUnDNAT:
				parts = append(parts, "reply restored: "+addrPort(pre, true)+" -> "+addrPort(post, true)+
					" (undoes the DNAT"+requestHook(f, e.Netns, event.TranslationDNAT)+")")
			case event.TranslationUnSNAT:
				parts = append(parts, "reply restored: "+addrPort(pre, false)+" -> "+addrPort(post, false)+
					" (undoes the SNAT"+requestHook(f, e.Netns, event.TranslationSNAT)+")")
			}
		}
		if len(parts) == 0 {
			return "no NAT"
		}
		s := strings.Join(parts, ", ")
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

// requestHook is " at HOOK" of the flow's translation t in a namespace,
// or "" when the flow does not show it.
func requestHook(f *flow.Flow, netns uint32, t event.Translation) string {
	if f == nil {
		return ""
	}
	for _, p := range f.Packets {
		for i := range p.Events {
			if e := &p.Events[i]; e.Netns == netns && e.Translation()&t != 0 {
				return " at " + e.Hook.String()
			}
		}
	}
	return ""
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
