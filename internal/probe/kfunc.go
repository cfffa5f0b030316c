package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// weakKfuncs are the kfuncs the programs call only where the kernel has
// them (declared __weak, each call behind a test of its address), all of
// them vmlinux's own: bpf_rdonly_cast (Linux 6.2+, base.h).
var weakKfuncs = []string{"bpf_rdonly_cast"}

// missingKfuncs says which of weakKfuncs this kernel's vmlinux lacks.
func missingKfuncs() ([]string, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("load kernel BTF: %w", err)
	}
	var missing []string
	for _, name := range weakKfuncs {
		var fn *btf.Func
		switch err := spec.TypeByName(name, &fn); {
		case errors.Is(err, btf.ErrNotFound):
			missing = append(missing, name)
		case err != nil:
			return nil, fmt.Errorf("look up kfunc %s: %w", name, err)
		}
	}
	return missing, nil
}

// kfuncCallPoison is the helper number a call to a missing kfunc becomes.
// The call is never verified (its branch is pruned), so any number would
// do; this one is recognizable in a verifier log, and is cilium/ebpf's own
// (kfuncCallPoisonBase).
const kfuncCallPoison = 0xdedc0de

// dropMissingKfuncs settles, before cilium/ebpf links the programs, each
// reference to a weak kfunc this kernel lacks the way cilium/ebpf would: its
// address reads 0 and a call to it becomes a call the verifier never
// reaches. cilium/ebpf v0.20 (and v0.22) looks a kfunc missing from vmlinux
// up in every BTF object of the kernel, every module's and every loaded
// program's, for every reference, one syscall and an info query each:
// 10.7 s of a 6.1 guest's 21.6 s of attach was that search (pprof), and a
// busy node has more modules and programs than a guest. The rewritten
// instruction keeps its source line and function metadata.
func dropMissingKfuncs(spec *ebpf.CollectionSpec, missing []string) {
	if len(missing) == 0 {
		return
	}
	gone := make(map[string]bool, len(missing))
	for _, name := range missing {
		gone[name] = true
	}
	for _, prog := range spec.Programs {
		for i, ins := range prog.Instructions {
			if !gone[ins.Reference()] {
				continue
			}
			var settled asm.Instruction
			switch {
			case ins.IsKfuncCall():
				settled = asm.BuiltinFunc(kfuncCallPoison).Call()
			case ins.OpCode.IsDWordLoad():
				settled = asm.LoadImm(ins.Dst, 0, asm.DWord)
			default:
				continue
			}
			settled = settled.WithSource(ins.Source())
			if fn := btf.FuncMetadata(&ins); fn != nil {
				settled = btf.WithFuncMetadata(settled, fn)
			}
			if sym := ins.Symbol(); sym != "" {
				settled = settled.WithSymbol(sym)
			}
			prog.Instructions[i] = settled
		}
	}
}
