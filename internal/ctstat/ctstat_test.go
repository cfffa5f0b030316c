package ctstat

import (
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestParseStat(t *testing.T) {
	const header = "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n"
	tests := []struct {
		name    string
		raw     string
		want    uint64
		wantErr bool
	}{
		{"summed over CPUs, hexadecimal", header +
			"00000040  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 0000000a 00000000 00000000  00000000 00000000 00000000 00000000\n" +
			"00000040  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000007 00000000 00000000  00000000 00000000 00000000 00000000\n", 17, false},
		{"found by its name", "drop entries\n00000003 00000040\n", 3, false},
		{"no CPU lines", header, 0, false},
		{"no drop column", "entries found\n00000001 00000002\n", 0, true},
		{"a short line", header + "00000040 00000000\n", 0, true},
		{"empty", "", 0, true},
	}
	for _, tt := range tests {
		got, err := parseStat([]byte(tt.raw), "drop")
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: got %d, %v; want %d, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// A netfilter drop of a packet without an entry gets the table's reading
// (reused while fresh), its drop counter counted from when watching
// began; other drops and events are left as they are.
func TestComplete(t *testing.T) {
	var reads int
	clock := time.Unix(1000, 0)
	tb := table{count: 512, max: 512, drops: 40}
	r := New(nil, func(reason uint32) string { return map[uint32]string{6: "NETFILTER_DROP", 2: "NOT_SPECIFIED"}[reason] })
	r.now = func() time.Time { return clock }
	r.read = func(string) (table, error) { reads++; return tb, nil }
	r.AddNamespace(netns.Target{Path: "/run/netns/n1", Inode: 42})
	tb.drops = 43

	drop := func(reason uint32, netns uint32, ct bool) *event.Event {
		e := &event.Event{Point: event.PointDrop, Kind: event.KindDrop, Netns: netns, Drop: event.Drop{Reason: reason}}
		if ct {
			e.Flags |= event.FlagCT
			e.CT.ID = 0xffff888100002000
		}
		return e
	}
	tests := []struct {
		name  string
		e     *event.Event
		after time.Duration
		table *table // the table from then on, when it changes
		want  event.Drop
		reads int
	}{
		{"no entry, a netfilter drop", drop(6, 42, false), 0, nil, event.Drop{Reason: 6, CTCount: 512, CTMax: 512, CTDrops: 3}, 2},
		{"the reading reused while fresh", drop(6, 42, false), fresh / 2, nil, event.Drop{Reason: 6, CTCount: 512, CTMax: 512, CTDrops: 3}, 2},
		{"read again once stale", drop(6, 42, false), fresh, &table{count: 511, max: 512, drops: 44}, event.Drop{Reason: 6, CTCount: 511, CTMax: 512, CTDrops: 4}, 3},
		{"a packet with an entry", drop(6, 42, true), 0, nil, event.Drop{Reason: 6}, 3},
		{"another reason", drop(2, 42, false), 0, nil, event.Drop{Reason: 2}, 3},
		{"a namespace not watched", drop(6, 43, false), 0, nil, event.Drop{Reason: 6}, 3},
	}
	for _, tt := range tests {
		clock = clock.Add(tt.after)
		if tt.table != nil {
			tb = *tt.table
		}
		r.Complete(tt.e)
		if tt.e.Drop != tt.want || reads != tt.reads {
			t.Errorf("%s: %+v after %d readings; want %+v after %d", tt.name, tt.e.Drop, reads, tt.want, tt.reads)
		}
	}
}
