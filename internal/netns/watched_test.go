package netns

import (
	"slices"
	"testing"
)

// A namespace gone is forgotten, the others keep their order.
func TestWatchedRemove(t *testing.T) {
	var w Watched
	for i, p := range []string{"/a", "/b", "/c"} {
		w.Add(Target{Path: p, Inode: uint32(i + 1)})
	}
	w.Remove(2)
	w.Remove(9)
	if _, ok := w.Path(2); ok || !slices.Equal(w.Paths(), []string{"/a", "/c"}) {
		t.Errorf("paths %v after removing /b", w.Paths())
	}
	if !w.Add(Target{Path: "/b", Inode: 2}) {
		t.Error("a namespace forgotten is not watched again")
	}
}
