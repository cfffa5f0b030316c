package explain

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// replyDroppedRPFilter: a reply was dropped by reverse-path filtering and
// no rule before this one found why it came the wrong way.
func replyDroppedRPFilter(f *flow.Flow, n Context) *Finding {
	_, drop := find(f, func(p *flow.Packet, e *event.Event) bool {
		return dropped(n, e, "IP_RPFILTER") && isReply(f, p)
	})
	if drop == nil {
		return nil
	}
	t := drop.Current()
	fd := &Finding{Evidence: []Evidence{evidence(n, drop, "reply dropped on %s: IP_RPFILTER", where(n, drop))}}
	fd.Summary = fmt.Sprintf("reply %s -> %s was dropped by reverse-path filtering (IP_RPFILTER) on %s: that host routes %s back through another interface.",
		fd.atPod(n, src(t)), fd.atPod(n, dst(t)), where(n, drop), t.Src)
	return fd
}
