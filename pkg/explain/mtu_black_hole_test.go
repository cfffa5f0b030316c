package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestMTUBlackHole(t *testing.T) {
	// withoutResend keeps the sender's first drop only.
	withoutResend := func(notice int) []event.Event {
		evs := fixture.MTUBlackHole(notice)
		for len(evs) > 0 && evs[len(evs)-1].Time > evs[0].Time+100e6 {
			evs = evs[:len(evs)-1]
		}
		return evs
	}
	// unnamed has no bytes of the dropped packets and no MTUs read in
	// user space: what a recording of a kernel older than those fields
	// and a drop without a snapshot give.
	unnamed := func() []event.Event {
		evs := fixture.MTUBlackHole(fixture.NoticeDropped)
		for i := range evs {
			evs[i].Packet = nil
			evs[i].Drop.LowerMTU, evs[i].Drop.SrcMTU = 0, 0
		}
		return evs
	}
	// otherCPU sends the ICMP message from another CPU than the drop's:
	// not the message the kernel sent for that drop.
	otherCPU := func() []event.Event {
		evs := fixture.MTUBlackHole(fixture.NoticeDropped)
		for i := range evs {
			if evs[i].Tuple.Proto == event.ProtoICMP {
				evs[i].CPU = 1
			}
		}
		return evs
	}
	runRule(t, mtuBlackHole, []ruleCase{
		{"the ICMP message dropped", fixture.MTUBlackHole(fixture.NoticeDropped), true, []string{
			"Packets 10.244.2.10:8080 (pod default/web-2) -> 10.244.1.10:40000 (pod default/web-1), 1500 bytes with DF set " +
				"(the sender's device has MTU 1500), were too big for flannel.1 (MTU 1450, over eth0 of MTU 1500) in n2",
			"the ICMP \"fragmentation needed\" (type 3, code 4) the node sent 10.244.2.10 (pod default/web-2) was dropped by a netfilter DROP verdict in n2",
			"and the sender sent the same segment 1 more time into the same drop",
			"Give the pods an MTU of at most 1450"}},
		{"the ICMP message dropped, the first drop only", withoutResend(fixture.NoticeDropped), true, []string{
			"4056 bytes with DF set", "was dropped by a netfilter DROP verdict in n2, in OUTPUT after NAT (filter table): the path's MTU never reached"}},
		{"no ICMP message seen, the segment resent into the drop", fixture.MTUBlackHole(fixture.NoticeUnseen), true, []string{
			"nettrace saw no ICMP \"fragmentation needed\" (type 3, code 4) sent for them", "1 more time into the same drop"}},
		{"neither bytes nor MTUs read", unnamed(), true, []string{
			"Packets 10.244.2.10:8080 (pod default/web-2) -> 10.244.1.10:40000 (pod default/web-1), larger than the route allowed, were too big for flannel.1 (MTU 1450) in n2"}},
		{"the ICMP message delivered: the sender sent smaller packets", fixture.MTUBlackHole(fixture.NoticeDelivered), false, nil},
		{"no ICMP message seen, nothing resent", withoutResend(fixture.NoticeUnseen), false, nil},
		{"an ICMP message from another CPU, nothing resent", func() []event.Event {
			evs := otherCPU()
			return evs[:len(evs)-3]
		}(), false, nil},
		{"an ICMP message from another CPU, the segment resent", otherCPU(), true, []string{"nettrace saw no ICMP"}},
		{"another drop", fixture.ConntrackTableFull(), false, nil},
	})
}
