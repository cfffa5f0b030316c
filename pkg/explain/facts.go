package explain

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

func isSYN(t event.Tuple) bool {
	return t.Proto == event.ProtoTCP && t.TCPFlags&(tcpSYN|tcpACK) == tcpSYN
}

// beginsWithSYNACK says whether a flow's first packet is a SYN-ACK: the
// tail of a handshake whose SYN came before the run, or in an earlier flow
// that ended while the server went on retransmitting its SYN-ACK (1, 3, 7
// s after the SYN: past the flow timeout once the client gave up). What
// befell that connection is told by its own flow, where its request is.
func beginsWithSYNACK(f *flow.Flow) bool {
	t := f.Tuple()
	return t.Proto == event.ProtoTCP && t.TCPFlags&(tcpSYN|tcpACK) == tcpSYN|tcpACK
}

func src(t event.Tuple) netip.AddrPort { return netip.AddrPortFrom(t.Src, t.Sport) }
func dst(t event.Tuple) netip.AddrPort { return netip.AddrPortFrom(t.Dst, t.Dport) }

// client is the address the flow's first packet came from.
func client(f *flow.Flow) netip.AddrPort { return src(f.Tuple()) }

// isReply says whether a packet travels toward the client.
func isReply(f *flow.Flow, p *flow.Packet) bool {
	first := p.Head()
	t := first.Current()
	if first.Point == event.PointNAT && first.Flags&event.FlagPre != 0 {
		t = first.NAT.Pre
	}
	return !f.FromClient(t)
}

func translated(e *event.Event) bool {
	if e.Point != event.PointNAT || e.Flags&event.FlagPre == 0 {
		return false
	}
	a, b := e.NAT.Pre, e.Tuple
	return a.Src != b.Src || a.Dst != b.Dst || a.Sport != b.Sport || a.Dport != b.Dport
}

// dnat finds the first destination NAT of a request: the packet, and the
// nat event that rewrote its destination.
func dnat(f *flow.Flow) (*flow.Packet, *event.Event) {
	for _, p := range f.Packets {
		if isReply(f, p) {
			continue
		}
		for i := range p.Events {
			e := &p.Events[i]
			if e.Translation()&event.TranslationDNAT != 0 && (e.Hook == event.HookOutput || e.Hook == event.HookPrerouting) {
				return p, e
			}
		}
	}
	return nil, nil
}

// requestSNAT returns the nat event that masqueraded the flow's request
// in a namespace, if one did. Only the request's own SNAT counts: a
// reply's source rewritten at POSTROUTING (or INPUT) undoes the request's
// DNAT, and is no masquerade (event.Translation).
func requestSNAT(f *flow.Flow, netns uint32) *event.Event {
	_, e := find(f, func(p *flow.Packet, e *event.Event) bool {
		return e.Netns == netns && e.Translation()&event.TranslationSNAT != 0 && !isReply(f, p)
	})
	return e
}

// natAt returns the packet's nat event at a hook in a namespace.
func natAt(p *flow.Packet, netns uint32, hook event.Hook) *event.Event {
	for i := range p.Events {
		e := &p.Events[i]
		if e.Point == event.PointNAT && e.Netns == netns && e.Hook == hook {
			return e
		}
	}
	return nil
}

// find returns the first event of any packet of the flow that matches.
func find(f *flow.Flow, match func(p *flow.Packet, e *event.Event) bool) (*flow.Packet, *event.Event) {
	for _, p := range f.Packets {
		for i := range p.Events {
			if match(p, &p.Events[i]) {
				return p, &p.Events[i]
			}
		}
	}
	return nil, nil
}

func dropped(n Context, e *event.Event, reason string) bool {
	return e.Point == event.PointDrop && n.ReasonName(e.Drop.Reason) == reason
}

// neighbourFailed says whether a drop is a failed neighbour resolution:
// NEIGH_FAILED for ARP; IPv6's neighbour discovery gives no reason
// (ndisc_error_report frees the packets a failed entry held with a plain
// kfree_skb, a tail call that leaves neigh_invalidate as the location, on
// 6.1 as on 6.18), so there the place says it.
func neighbourFailed(n Context, e *event.Event) bool {
	return droppedAs(n, e, "NEIGH_FAILED", "neigh_invalidate", "ndisc_error_report")
}

// noWay says whether a drop was for want of a way to the destination: no
// neighbour answered for it, or no route leads there.
func noWay(n Context, e *event.Event) bool {
	r := n.ReasonName(e.Drop.Reason)
	return neighbourFailed(n, e) || r == "IP_OUTNOROUTES" || r == "IP_INNOROUTES"
}

// droppedAs says whether e is a drop for reason, or a free without a reason
// in one of the functions freedIn, where the kernel frees for that reason
// without saying so.
func droppedAs(n Context, e *event.Event, reason string, freedIn ...string) bool {
	if e.Point != event.PointDrop {
		return false
	}
	switch n.ReasonName(e.Drop.Reason) {
	case reason:
		return true
	case "NOT_SPECIFIED":
		at := n.SymbolName(e.Drop.Location)
		for _, fn := range freedIn {
			if strings.HasPrefix(at, fn+"+") {
				return true
			}
		}
	}
	return false
}

// plural is "1 packet", "2 packets".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// where renders netns/dev of an event.
func where(n Context, e *event.Event) string {
	s := n.NetnsName(e.Netns)
	if d := e.Ifname.String(); d != "" {
		s += "/" + d
	}
	return s
}

// evidence keeps an event and what it shows. Not its packet bytes: they
// refer to the flow's memory, which the finding outlives.
func evidence(n Context, e *event.Event, format string, args ...any) Evidence {
	ev := Evidence{Event: *e, Fact: fmt.Sprintf(format, args...)}
	ev.Event.Packet = nil
	return ev
}

func natFact(n Context, e *event.Event) string {
	if !translated(e) {
		return fmt.Sprintf("%s %s: not translated (%s -> %s)", n.NetnsName(e.Netns), e.Hook, src(e.Tuple), dst(e.Tuple))
	}
	return fmt.Sprintf("%s %s: %s -> %s translated to %s -> %s", n.NetnsName(e.Netns), e.Hook,
		src(e.NAT.Pre), dst(e.NAT.Pre), src(e.Tuple), dst(e.Tuple))
}

func countSYNs(f *flow.Flow) (n int, last *event.Event) {
	for _, p := range f.Packets {
		if isReply(f, p) || !isSYN(p.Head().Current()) {
			continue
		}
		n++
		last = p.Last()
	}
	return n, last
}

func hasReply(f *flow.Flow) bool {
	for _, p := range f.Packets {
		if isReply(f, p) {
			return true
		}
	}
	return false
}
