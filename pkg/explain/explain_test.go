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
		{"incident 5 (its client also sent a reset)", fixture.Hairpin(false), "reply-bypassed-nat"},
		{"netfilter drop", fixture.NetfilterDrop(), "dropped-by-netfilter"},
		{"no listener", fixture.NoListener(), "no-listener"},
		{"rp_filter", fixture.RPFilterReply(), "reply-dropped-rpfilter"},
		{"no reply", fixture.NoReply(), "no-reply"},
		{"incident 1 healthy", fixture.SNATMissing(true), ""},
		{"incident 2 healthy", fixture.SYNOverflow(true), ""},
		{"incident 4 healthy", fixture.StaleHostPort(true), ""},
		{"incident 5 healthy", fixture.Hairpin(true), ""},
	}
	for _, tt := range tests {
		flows := flowsOf(t, tt.events)
		if len(flows) != 1 {
			t.Errorf("%s: %d flows", tt.name, len(flows))
			continue
		}
		got := ""
		if fd := Explain(flows[0], fixture.Names{}); fd != nil {
			got = fd.Rule
		}
		if got != tt.want {
			t.Errorf("%s: finding %q, want %q", tt.name, got, tt.want)
		}
	}
}
