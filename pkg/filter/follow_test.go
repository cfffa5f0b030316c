package filter

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestFollowerFollowsThroughNATAndReplies(t *testing.T) {
	tests := []struct {
		name   string
		expr   string
		events []event.Event
		want   int // events followed
	}{
		{"no filter follows everything", "", fixture.SNATMissing(false), len(fixture.SNATMissing(false))},
		{"the ClusterIP: every event of the connection", "host 10.96.0.10", fixture.SNATMissing(false), len(fixture.SNATMissing(false))},
		{"the pod address: from the DNAT on", "host 10.244.2.10 and port 8080", fixture.SNATMissing(false), len(fixture.SNATMissing(false)) - 1},
		{"another address: nothing", "host 192.0.2.1", fixture.SNATMissing(false), 0},
		{"the reply port only (no conntrack in the pod's namespace)", "port 8080", fixture.Hairpin(false)[4:], 0},
	}
	for _, tt := range tests {
		p, err := Compile(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		f := NewFollower(p)
		got := 0
		count := func(*event.Event) { got++ }
		for i := range tt.events {
			if f.Follow(&tt.events[i], count) {
				got++
			}
		}
		if got != tt.want {
			t.Errorf("%s: followed %d events, want %d", tt.name, got, tt.want)
		}
	}
}
