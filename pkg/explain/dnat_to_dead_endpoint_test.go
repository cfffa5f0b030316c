package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestDNATToDeadEndpoint(t *testing.T) {
	onlySYNs := fixture.StaleHostPort(false)
	var noNeigh = onlySYNs[:0:0]
	for _, e := range onlySYNs {
		if e.Point != event.PointDrop {
			noNeigh = append(noNeigh, e)
		}
	}
	// IPv6's failed neighbour discovery frees the packets without a
	// reason, in neigh_invalidate; elsewhere a reasonless drop is no cause.
	reasonless := func(location uint64) []event.Event {
		evs := fixture.StaleHostPort(false)
		for i := range evs {
			if evs[i].Point == event.PointDrop {
				evs[i].Drop.Reason, evs[i].Drop.Location = fixture.Reason("NOT_SPECIFIED"), location
			}
		}
		return evs
	}
	// Each SYN reached a listener there, whose answer the tracepoint method
	// could not see (the namespace not watched yet): the address is alive.
	var listened []event.Event
	for _, e := range noNeigh {
		listened = append(listened, e)
		s := fixture.Seq{Now: e.Time}
		listened = append(listened, fixture.Syn(&s, e.Skb, "p2/eth0", e.Current(), event.SYNUnobserved, 0, 0))
	}
	runRule(t, dnatToDeadEndpoint, []ruleCase{
		{"a listener took the SYNs", listened, false, nil},
		{"neighbour discovery failed", reasonless(fixture.NeighInvalidate), true, []string{"neighbour resolution failed",
			"freed by neigh_invalidate+0x7e without a reason, 2 packets"}},
		{"reasonless drop elsewhere", reasonless(0xffffffff81000000), true, []string{"nothing came back after 2 SYNs"}},
		{"neighbour failed", fixture.StaleHostPort(false), true, []string{"SYN to 172.20.0.1:8443 was DNATed to 10.244.1.36:443 (pod shop/ingress-old) in n1 PREROUTING",
			"never answered", "neighbour resolution failed", "NEIGH_FAILED, 2 packets"}},
		{"nothing came back", noNeigh, true, []string{"nothing came back after 2 SYNs"}},
		{"live endpoint answered", fixture.StaleHostPort(true), false, nil},
		{"endpoint answered, reply lost later", fixture.SNATMissing(false), false, nil},
	})
}
