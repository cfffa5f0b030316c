package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// A packet's end names where it was: its namespace and device, or, freed
// where neither holds it (a closing socket's queue), its place in the
// kernel.
func TestPacketEnd(t *testing.T) {
	var s fixture.Seq
	fin := fixture.T("10.0.0.1:40000", "10.0.0.2:80", fixture.FIN|fixture.ACK)
	unplaced := fixture.Drop(&s, 0x1, "n1", fin, "NETFILTER_DROP")
	unplaced.Netns = 0
	for _, tc := range []struct {
		drop event.Event
		want string
	}{
		{fixture.Drop(&s, 0x1, "n1/eth0", fin, "NETFILTER_DROP"), "dropped (NETFILTER_DROP) on n1/eth0"},
		{fixture.Drop(&s, 0x1, "n1/eth0", fin, "NOT_SPECIFIED"), "freed on n1/eth0 (the kernel gave no drop reason)"},
		{unplaced, "dropped (NETFILTER_DROP) at ip_rcv_finish_core+0x25b"},
	} {
		if got := end(fixture.Context{}, &flow.Packet{Events: []event.Event{tc.drop}}); got != tc.want {
			t.Errorf("packet end %q, want %q", got, tc.want)
		}
	}
}
