package event

import (
	"net/netip"
	"slices"
	"testing"
)

func TestTranslation(t *testing.T) {
	tuple := func(src, dst string) Tuple {
		s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
		return Tuple{Src: s.Addr(), Sport: s.Port(), Dst: d.Addr(), Dport: d.Port(), Proto: ProtoTCP}
	}
	const (
		client  = "172.30.0.41:40000"
		service = "10.180.0.1:80"
		pod     = "10.244.2.10:8080"
		masq    = "10.244.1.0:61000"
	)
	nat := func(hook Hook, pre, post Tuple, info uint8, status CTStatus) *Event {
		e := &Event{Point: PointNAT, Hook: hook, Flags: FlagPre | FlagCT, Tuple: post}
		e.NAT.Pre = pre
		e.CT = Conntrack{ID: 1, Info: info, Status: status}
		return e
	}
	const request, reply = 0, 3
	for _, tc := range []struct {
		name string
		e    *Event
		want []string
	}{
		{"the request's DNAT", nat(HookPrerouting, tuple(client, service), tuple(client, pod), 2, CTDstNAT), []string{"dnat"}},
		{"the request's masquerade", nat(HookPostrouting, tuple(client, pod), tuple(masq, pod), request, CTDstNAT|CTSrcNAT), []string{"snat"}},
		{"a reply's un-SNAT", nat(HookPrerouting, tuple(pod, masq), tuple(pod, client), reply, CTDstNAT|CTSrcNAT), []string{"unsnat"}},
		// kube-proxy without masquerade: the reply's source is restored
		// at POSTROUTING, where a masquerade would happen.
		{"a reply's un-DNAT at POSTROUTING", nat(HookPostrouting, tuple(pod, client), tuple(service, client), reply, CTDstNAT), []string{"undnat"}},
		{"a reply's un-DNAT at INPUT", nat(HookInput, tuple(pod, client), tuple(service, client), reply, CTDstNAT), []string{"undnat"}},
		{"both at once on a reply", nat(HookPrerouting, tuple(pod, masq), tuple(service, client), reply, CTDstNAT|CTSrcNAT), []string{"undnat", "unsnat"}},
		{"untranslated", nat(HookPostrouting, tuple(client, pod), tuple(client, pod), request, CTDstNAT), nil},
		{"not a nat event", &Event{Point: PointDrop, Tuple: tuple(client, pod)}, nil},
	} {
		if got := tc.e.Translation().Names(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
