package netns

import "slices"

// Watched is the set of namespaces a point's user-space part reads, each
// entered by its path, known by its inode (the events' netns), in the
// order they were added. The zero value is empty.
type Watched struct {
	paths map[uint32]string
	order []uint32
}

// Add watches t; false when it already was. A namespace watched through a
// path that no longer leads to it (a process gone) is reached through t's
// from then on.
func (w *Watched) Add(t Target) bool {
	if p, ok := w.paths[t.Inode]; ok {
		if ino, err := inode(p); err != nil || ino != t.Inode {
			w.paths[t.Inode] = t.Path
		}
		return false
	}
	if w.paths == nil {
		w.paths = map[uint32]string{}
	}
	w.paths[t.Inode] = t.Path
	w.order = append(w.order, t.Inode)
	return true
}

// Remove stops watching the namespace of an inode (gone).
func (w *Watched) Remove(ino uint32) {
	if _, ok := w.paths[ino]; !ok {
		return
	}
	delete(w.paths, ino)
	w.order = slices.DeleteFunc(w.order, func(i uint32) bool { return i == ino })
}

// Path is where to enter the namespace of an inode; false when it is not
// watched.
func (w *Watched) Path(ino uint32) (string, bool) {
	p, ok := w.paths[ino]
	return p, ok
}

// Paths are the watched namespaces' paths, in the order they were added.
func (w *Watched) Paths() []string {
	out := make([]string, len(w.order))
	for i, ino := range w.order {
		out[i] = w.paths[ino]
	}
	return out
}
