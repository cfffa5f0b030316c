package trace

import (
	"bytes"
	"os"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// FuzzReader: whatever the bytes, the reader returns events or a located
// error, never panics.
func FuzzReader(f *testing.F) {
	dir := f.TempDir()
	path := dir + "/seed.ntrace"
	w, err := Create(path, Meta{Nettrace: "fuzz"}, fixture.Context{})
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range fixture.Hairpin(false) {
		w.Event(&e)
	}
	w.Close(Summary{})
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader("fuzz", bytes.NewReader(data))
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("unlocated error %T: %v", err, err)
			}
			return
		}
		for i := 0; i < 1<<16; i++ {
			var e event.Event
			if err := r.Next(&e); err != nil {
				return
			}
		}
	})
}
