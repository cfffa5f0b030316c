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

// A namespace watched through a path gone (its process exited) is reached
// through the next path found for it; one still there is kept.
func TestWatchedPathGone(t *testing.T) {
	ino, err := inode("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var w Watched
	w.Add(Target{Path: "/proc/999999999/ns/net", Inode: ino})
	if w.Add(Target{Path: "/proc/self/ns/net", Inode: ino}) {
		t.Error("a namespace watched already was added again")
	}
	w.Add(Target{Path: "/proc/thread-self/ns/net", Inode: ino})
	if p, _ := w.Path(ino); p != "/proc/self/ns/net" {
		t.Errorf("path %s, want /proc/self/ns/net", p)
	}
}
