package explain

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// noListener: a SYN reached a host where nothing listens on its port, and
// the kernel answered with a reset.
func noListener(f *flow.Flow, n Context) *Finding {
	p, rst := find(f, func(p *flow.Packet, e *event.Event) bool {
		return e.Point == event.PointTCP && e.Kind == event.KindResetSent && isSYN(p.Head().Current())
	})
	if rst == nil {
		return nil
	}
	var syn *event.Event
	for i := range p.Events {
		if e := &p.Events[i]; e.Netns == rst.Netns && e.Point != event.PointTCP {
			syn = e
		}
	}
	if syn == nil {
		syn = p.Last()
	}
	t := syn.Current()
	fd := &Finding{
		Evidence: []Evidence{
			evidence(n, syn, "SYN to %s seen on %s", dst(t), where(n, syn)),
			evidence(n, rst, "reset sent from %s", n.NetnsName(rst.Netns)),
		},
	}
	fd.Summary = fmt.Sprintf("SYN %s -> %s reached %s and nothing listens on port %d there: the kernel answered with a reset.",
		fd.atPod(n, src(t)), fd.atPod(n, dst(t)), n.NetnsName(rst.Netns), t.Dport)
	return fd
}
