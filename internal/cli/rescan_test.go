package cli

import (
	"maps"
	"slices"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Events from namespaces not watched are sighted once each, until a look
// at every process: those it found are watched by then, those it did not
// are not sighted again before the tenth look.
func TestSightings(t *testing.T) {
	c := &capture{watched: map[uint32]bool{1: true}}
	s := sightings{c}
	for _, ns := range []uint32{1, 2, 3, 0, 2} {
		s.Complete(&event.Event{Netns: ns})
	}
	if got := slices.Sorted(maps.Keys(c.sighted)); !slices.Equal(got, []uint32{2, 3}) {
		t.Fatalf("sighted %v, want [2 3]", got)
	}
	c.noteUnfound([]netns.Target{{Inode: 2}, {Inode: 7}})
	if len(c.sighted) != 0 || !maps.Equal(c.unfound, map[uint32]bool{3: true}) {
		t.Fatalf("after the look: sighted %v, unfound %v; want none, [3]", c.sighted, c.unfound)
	}
	s.Complete(&event.Event{Netns: 3})
	if len(c.sighted) != 0 {
		t.Errorf("a namespace no process holds sighted again: %v", c.sighted)
	}
}
