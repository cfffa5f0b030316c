package explain

import (
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// Ordinary says what a packet's drop is when it is the kernel's ordinary
// work, not a loss: the kernel frees such packets with kfree_skb and no
// reason, which reads as a fault it is not; and multicast group management
// (IGMP, MLD), whatever dropped it, is no connection's loss. It returns ""
// for any other packet. Timelines label the drop with it; the event itself is unchanged.
func Ordinary(f *flow.Flow, i int, n Context) string {
	p := f.Packets[i]
	last := p.Last()
	if last.Point != event.PointDrop {
		return ""
	}
	t := p.Head().Current()
	if n.ReasonName(last.Drop.Reason) != "NOT_SPECIFIED" {
		if what := groupManagement(t); what != "" {
			// Whatever dropped it (a reverse-path filter drops a bridge
			// querier's own query, looped back to its host, as coming
			// from a local address), no connection waited on it.
			return what + ": multicast group management, which the link repeats; no connection's packet"
		}
		return ""
	}
	switch {
	case t.Multicast():
		// ip_rcv_finish_core frees multicast for a group no socket of the
		// namespace joined (a bridge's IGMP queries, mDNS, ...).
		return "multicast for a group this namespace has not joined"
	case isSYN(t) && !isReply(f, p) && inTCPReceive(n.SymbolName(last.Drop.Location)) && requestHeld(f, i):
		// tcp_check_req answers a SYN for a request already in the
		// listener's SYN queue by sending the SYN-ACK again, and the
		// SYN itself is freed.
		return "a retransmitted SYN for a request the listener already holds (it sent its SYN-ACK again)"
	}
	return ""
}

// inTCPReceive says whether a drop location is TCP's receive entry, where
// a SYN meeting a pending request is freed.
func inTCPReceive(at string) bool {
	return strings.HasPrefix(at, "tcp_v4_rcv+") || strings.HasPrefix(at, "tcp_v6_rcv+")
}

// requestHeld says whether the listener held the request of packet i of
// the flow when it came: its own syn step, or an earlier SYN's, says it
// was queued, or the listener already answered with a SYN-ACK.
func requestHeld(f *flow.Flow, i int) bool {
	for k := 0; k <= i; k++ {
		p := f.Packets[k]
		if k < i && isReply(f, p) && p.Head().Current().TCPFlags&(tcpSYN|tcpACK) == tcpSYN|tcpACK {
			return true
		}
		for j := range p.Events {
			if e := &p.Events[j]; e.Point == event.PointSYN && e.SYN.Outcome == event.SYNQueued {
				return true
			}
		}
	}
	return false
}

// IGMP and the MLD messages of ICMPv6 (its type in the tuple's source
// port's high byte).
const (
	protoIGMP   = 2
	mldQuery    = 130
	mldReport   = 131
	mldDone     = 132
	mldv2Report = 143
)

// groupManagement names a multicast group management message (IGMP, an
// MLD query, report or done), or returns "".
func groupManagement(t event.Tuple) string {
	switch {
	case t.Proto == protoIGMP:
		return "IGMP"
	case t.Proto != event.ProtoICMPv6:
		return ""
	}
	switch t.Sport >> 8 {
	case mldQuery:
		return "MLD query"
	case mldReport, mldv2Report:
		return "MLD report"
	case mldDone:
		return "MLD done"
	}
	return ""
}
