package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Only the root cause is reported, and healthy flows get nothing.
func TestExplainReportsTheRootCauseOnly(t *testing.T) {
	tests := []struct {
		name   string
		events []event.Event
		want   string
	}{
		{"incident 1 (its reply is also an rp_filter drop)", fixture.SNATMissing(false), "snat-missing-on-tunnel"},
		{"incident 2", fixture.SYNOverflow(false), "syn-dropped-at-listener"},
		{"incident 4 (its SYNs also got no reply)", fixture.StaleHostPort(false), "dnat-to-dead-endpoint"},
		{"a pod calling itself through a bridge port without hairpin mode (also a DNAT never answered)", fixture.HairpinOff(false), "bridge-hairpin-off"},
		{"a pod calling itself, hairpin mode on", fixture.HairpinOff(true), ""},
		{"incident 5 (its client also sent a reset)", fixture.Hairpin(false), "reply-bypassed-nat"},
		{"an MTU black hole (its ICMP message also dropped by a rule)", fixture.MTUBlackHole(fixture.NoticeDropped), "mtu-black-hole"},
		{"too big once, the ICMP message delivered", fixture.MTUBlackHole(fixture.NoticeDelivered), ""},
		{"netfilter drop", fixture.NetfilterDrop(), "dropped-by-netfilter"},
		{"no listener", fixture.NoListener(), "no-listener"},
		{"rp_filter", fixture.RPFilterReply(), "reply-dropped-rpfilter"},
		{"no reply", fixture.NoReply(), "no-reply"},
		{"incident 1 healthy", fixture.SNATMissing(true), ""},
		{"incident 2 healthy", fixture.SYNOverflow(true), ""},
		{"incident 4 healthy", fixture.StaleHostPort(true), ""},
		{"incident 5 healthy", fixture.Hairpin(true), ""},
		{"a bridge querier's MLD query dropped by a reverse-path filter", mldQueryDropped(), ""},
		{"mDNS dropped by a rule", multicastDropped(), "dropped-by-netfilter"},
	}
	for _, tt := range tests {
		flows := flowsOf(t, tt.events)
		if len(flows) != 1 {
			t.Errorf("%s: %d flows", tt.name, len(flows))
			continue
		}
		got := ""
		if fd := Explain(flows[0], fixture.Context{}); fd != nil {
			got = fd.Rule
		}
		if got != tt.want {
			t.Errorf("%s: finding %q, want %q", tt.name, got, tt.want)
		}
	}
}

// mldQueryDropped is a bridge querier's general query, looped back to its
// host and dropped there by ip6tables' rpfilter match.
func mldQueryDropped() []event.Event {
	s := &fixture.Seq{}
	return []event.Event{
		fixture.Dev(s, 4, "n1/cni0", event.KindDevRx, mldQueryTuple),
		fixture.Drop(s, 4, "n1/cni0", mldQueryTuple, "NETFILTER_DROP"),
	}
}

// multicastDropped is an mDNS datagram dropped by a rule: a true drop.
func multicastDropped() []event.Event {
	s := &fixture.Seq{}
	mdns := fixture.T("10.244.1.50:5353", "224.0.0.251:5353", 0)
	mdns.Proto = event.ProtoUDP
	return []event.Event{
		fixture.Dev(s, 4, "n1/cni0", event.KindDevRx, mdns),
		fixture.Drop(s, 4, "n1/cni0", mdns, "NETFILTER_DROP"),
	}
}

// A flow that may have lost records is explained by what it shows: a drop
// with its reason, a reset, a queue overflow still explain it; a reply,
// answer or conntrack crossing not seen proves nothing.
func TestIncompleteFlowsAreExplainedByWhatTheyShow(t *testing.T) {
	tests := []struct {
		name   string
		events []event.Event
		want   string
	}{
		{"incident 1: its reply's rp_filter drop", fixture.SNATMissing(false), "snat-missing-on-tunnel"},
		{"incident 1, its reply lost", fixture.SNATMissing(false)[:9], ""},
		{"incident 2: the overflow", fixture.SYNOverflow(false), "syn-dropped-at-listener"},
		{"incident 4: the neighbour failure", fixture.StaleHostPort(false), "dnat-to-dead-endpoint"},
		{"incident 4, its drops lost", withoutDrops(fixture.StaleHostPort(false)), ""},
		{"hairpin mode off: the bridge's drop", fixture.HairpinOff(false), "bridge-hairpin-off"},
		{"incident 5: no conntrack crossing seen", fixture.Hairpin(false), ""},
		{"an MTU black hole: the ICMP message's drop", fixture.MTUBlackHole(fixture.NoticeDropped), "mtu-black-hole"},
		{"too big again, no ICMP message seen", fixture.MTUBlackHole(fixture.NoticeUnseen), ""},
		{"a netfilter drop", fixture.NetfilterDrop(), "dropped-by-netfilter"},
		{"conntrack INVALID, its FIN may be lost: the drop by its rule", fixture.ConntrackInvalid(false, false, false), "dropped-by-netfilter"},
		{"conntrack INVALID answered with a reset, its FIN may be lost", fixture.ConntrackInvalid(false, false, true), ""},
		{"no listener's reset", fixture.NoListener(), "no-listener"},
		{"rp_filter", fixture.RPFilterReply(), "reply-dropped-rpfilter"},
		{"no reply seen", fixture.NoReply(), ""},
	}
	for _, tt := range tests {
		flows := flowsOf(t, tt.events)
		if len(flows) != 1 {
			t.Errorf("%s: %d flows", tt.name, len(flows))
			continue
		}
		f := flows[0]
		complete := Explain(f, fixture.Context{})
		f.LostAround = 7
		got := ""
		if fd := Explain(f, fixture.Context{}); fd != nil {
			got = fd.Rule
		}
		if got != tt.want {
			t.Errorf("%s: finding %q, want %q", tt.name, got, tt.want)
		}
		if tt.want == "" && complete == nil {
			t.Errorf("%s: no finding when complete either: the case shows nothing withheld", tt.name)
		}
	}
}

func withoutDrops(evs []event.Event) []event.Event {
	var kept []event.Event
	for _, e := range evs {
		if e.Point != event.PointDrop {
			kept = append(kept, e)
		}
	}
	return kept
}
