package probe

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// Every object is built for amd64 and arm64 (gen.go). Each arm64 object
// must hold the amd64 one's programs, in the same sections, its maps with
// the same shapes, and the same event record: a point then has the same
// methods on both, and the decoder reads both alike.
func TestObjectsAgreeAcrossArchitectures(t *testing.T) {
	x86, _ := filepath.Glob("*_x86_bpfel.o")
	if len(x86) == 0 {
		t.Fatal("no amd64 objects here: go generate builds them")
	}
	for _, path := range x86 {
		arm := strings.Replace(path, "_x86_", "_arm64_", 1)
		a, b := loadSpec(t, path), loadSpec(t, arm)
		if got, want := sections(b), sections(a); !maps.Equal(got, want) {
			t.Errorf("%s's programs %v, %s's %v", arm, got, path, want)
		}
		if got, want := mapShapes(b), mapShapes(a); !maps.Equal(got, want) {
			t.Errorf("%s's maps %v, %s's %v", arm, got, path, want)
		}
		if got, want := eventSize(t, b), eventSize(t, a); got != want {
			t.Errorf("%s's struct nt_event is %d bytes, %s's %d", arm, got, path, want)
		}
	}
}

func loadSpec(t *testing.T, path string) *ebpf.CollectionSpec {
	t.Helper()
	spec, err := ebpf.LoadCollectionSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// sections are a spec's programs' sections, by name.
func sections(s *ebpf.CollectionSpec) map[string]string {
	out := map[string]string{}
	for name, p := range s.Programs {
		out[name] = p.SectionName
	}
	return out
}

// mapShapes are a spec's maps' types and sizes, by name.
func mapShapes(s *ebpf.CollectionSpec) map[string][4]uint32 {
	out := map[string][4]uint32{}
	for name, m := range s.Maps {
		out[name] = [4]uint32{uint32(m.Type), m.KeySize, m.ValueSize, m.MaxEntries}
	}
	return out
}

// eventSize is the size of struct nt_event in a spec's BTF, 0 without it.
func eventSize(t *testing.T, s *ebpf.CollectionSpec) uint32 {
	t.Helper()
	var ev *btf.Struct
	if err := s.Types.TypeByName("nt_event", &ev); err != nil {
		return 0
	}
	return ev.Size
}
