package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// A reply's source restored at POSTROUTING (the request's DNAT undone)
// reads like a masquerade by its hook; only the request's own SNAT counts.
func TestRequestSNAT(t *testing.T) {
	client, service, pod, masq := "10.244.1.10:40000", "10.96.0.30:80", "10.244.1.20:8080", "10.244.1.1:61000"
	for _, tc := range []struct {
		name       string
		masquerade bool
		want       bool
	}{
		{"DNAT, the reply un-DNATed at POSTROUTING", false, false},
		{"DNAT and masquerade, the reply un-SNATed and un-DNATed", true, true},
	} {
		var s fixture.Seq
		req := fixture.T(client, service, fixture.SYN)
		dnatted := fixture.T(client, pod, fixture.SYN)
		status := event.CTDstNAT
		sent, back := dnatted, fixture.T(pod, client, fixture.SYNACK)
		if tc.masquerade {
			status |= event.CTSrcNAT
			sent, back = fixture.T(masq, pod, fixture.SYN), fixture.T(pod, masq, fixture.SYNACK)
		}
		ct := fixture.CT(0xc1, req, back.Reverse(), status, false)
		ctReply := fixture.CT(0xc1, req, back.Reverse(), status, true)
		restored := fixture.T(pod, client, fixture.SYNACK)
		events := []event.Event{
			fixture.NAT(&s, 1, "n1/eth0", event.HookPrerouting, req, dnatted, ct),
			fixture.NAT(&s, 1, "n1/cni0", event.HookPostrouting, dnatted, sent, ct),
			fixture.NAT(&s, 2, "n1/cni0", event.HookPrerouting, back, restored, ctReply),
			fixture.NAT(&s, 2, "n1/eth0", event.HookPostrouting, restored, fixture.T(service, client, fixture.SYNACK), ctReply),
		}
		flows := flowsOf(t, events)
		if len(flows) != 1 {
			t.Fatalf("%s: %d flows", tc.name, len(flows))
		}
		if got := requestSNAT(flows[0], fixture.Netns("n1")) != nil; got != tc.want {
			t.Errorf("%s: request SNATed %v, want %v", tc.name, got, tc.want)
		}
	}
}
