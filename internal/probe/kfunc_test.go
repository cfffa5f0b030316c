package probe

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// TestDropMissingKfuncs settles every reference to the weak kfuncs, as on a
// kernel without them, and loads the result on this kernel: the programs'
// fallback (probe reads) must pass the verifier with the kfunc gone.
func TestDropMissingKfuncs(t *testing.T) {
	spec, err := loadDev()
	if err != nil {
		t.Fatal(err)
	}
	if n := kfuncReferences(spec); n == 0 {
		t.Fatalf("the dev object references none of %v: the test proves nothing", weakKfuncs)
	}
	dropMissingKfuncs(spec, weakKfuncs)
	if n := kfuncReferences(spec); n != 0 {
		t.Fatalf("%d references to %v left", n, weakKfuncs)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads the programs")
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		t.Fatalf("the programs without %v do not load: %v", weakKfuncs, err)
	}
	coll.Close()
}

func kfuncReferences(spec *ebpf.CollectionSpec) int {
	n := 0
	for _, prog := range spec.Programs {
		for _, ins := range prog.Instructions {
			for _, name := range weakKfuncs {
				if ins.Reference() == name {
					n++
				}
			}
		}
	}
	return n
}
