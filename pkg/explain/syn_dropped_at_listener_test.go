package explain

import (
	"net/netip"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestSYNDroppedAtListener(t *testing.T) {
	runRule(t, synDroppedAtListener, []ruleCase{
		{"accept queue full", fixture.SYNOverflow(false), true, []string{"SYN to 10.244.1.10:8080", "netns p1",
			"accept queue full (3/2)", "ListenOverflows +5, ListenDrops +5", "DNATed to 10.244.1.10:8080 (pod default/web-1) in n1 PREROUTING"}},
		{"a server on every address", onEveryAddress(fixture.SYNOverflow(false)), true, []string{
			"SYN to 10.244.1.10:8080 reached the listening socket 0.0.0.0:8080 in netns p1"}},
		{"queued", fixture.SYNOverflow(true), false, nil},
		{"answered with a syncookie", answeredByCookie(fixture.SYNOverflow(true)), false, nil},
		{"no listener involved", fixture.NoListener(), false, nil},
	})
}

// onEveryAddress makes the SYN events' listener a socket bound to every
// address, as most pods' servers are.
func onEveryAddress(evs []event.Event) []event.Event {
	for i := range evs {
		if evs[i].Point == event.PointSYN {
			evs[i].SYN.Listener = netip.AddrPortFrom(netip.IPv4Unspecified(), evs[i].SYN.Listener.Port())
		}
	}
	return evs
}

// answeredByCookie turns the queued SYN of a handshake into one a
// syncookie answered: the SYN queue was full, and nothing was dropped.
func answeredByCookie(evs []event.Event) []event.Event {
	for i := range evs {
		if evs[i].Point == event.PointSYN {
			evs[i].SYN.Outcome, evs[i].SYN.SYNQueue, evs[i].SYN.AcceptMax = event.SYNCookie, 2, 1
		}
	}
	return evs
}
