package explain

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// synDroppedAtListener: a SYN reached a listening socket, which dropped it.
func synDroppedAtListener(f *flow.Flow, n Context) *Finding {
	_, s := find(f, func(_ *flow.Packet, e *event.Event) bool {
		return e.Point == event.PointSYN && e.SYN.Outcome.Dropped()
	})
	if s == nil {
		return nil
	}
	drops := 0
	for _, p := range f.Packets {
		for i := range p.Events {
			if e := &p.Events[i]; e.Point == event.PointSYN && e.SYN.Outcome.Dropped() {
				drops++
			}
		}
	}
	// A pod's server usually listens on every address (0.0.0.0:8080):
	// the SYN's destination is where it went, the socket's address which
	// socket took it.
	socket := "the listening socket"
	if to := dst(s.Tuple); s.SYN.Listener != to {
		socket += " " + s.SYN.Listener.String()
	}
	summary := fmt.Sprintf("SYN to %s reached %s in netns %s and was dropped in tcp_conn_request: %s",
		dst(s.Tuple), socket, n.NetnsName(s.Netns), dropCause(s))
	if s.SYN.ListenOverfl > 0 || s.SYN.ListenDrops > 0 {
		summary += fmt.Sprintf("; ListenOverflows +%d, ListenDrops +%d in that netns", s.SYN.ListenOverfl, s.SYN.ListenDrops)
	}
	if drops > 1 {
		summary += fmt.Sprintf("; %d SYNs of this connection were dropped", drops)
	}
	fd := &Finding{Evidence: []Evidence{evidence(n, s, "listener %s in %s: %s", s.SYN.Listener, n.NetnsName(s.Netns), dropCause(s))}}
	if p, d := dnat(f); d != nil {
		fd.Service = serviceOf(n, p, d, nil)
		summary += fmt.Sprintf(" (the connection to %s was DNATed to %s in %s %s)", withService(dst(d.NAT.Pre), fd.Service), fd.atPod(n, dst(d.Tuple)), n.NetnsName(d.Netns), d.Hook)
		fd.Evidence = append([]Evidence{evidence(n, d, "%s", natFact(n, d))}, fd.Evidence...)
	}
	fd.Summary = summary + "."
	return fd
}

func dropCause(s *event.Event) string {
	switch s.SYN.Outcome {
	case event.SYNDropAcceptQueue:
		return fmt.Sprintf("accept queue full (%d/%d)", s.SYN.AcceptQueue, s.SYN.AcceptMax)
	case event.SYNDropSYNQueue:
		return fmt.Sprintf("SYN queue full (%d, limit %d)", s.SYN.SYNQueue, s.SYN.AcceptMax)
	case event.SYNDropOther:
		return fmt.Sprintf("no request was created (PAWS, an LSM or memory; accept queue %d/%d, SYN queue %d)", s.SYN.AcceptQueue, s.SYN.AcceptMax, s.SYN.SYNQueue)
	}
	return fmt.Sprintf("%s (accept queue %d/%d)", s.SYN.Outcome, s.SYN.AcceptQueue, s.SYN.AcceptMax)
}
