package probe

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// registerArgs is how many arguments every BPF trampoline takes: those
// passed in registers, six on x86-64 (more from Linux 6.6) and eight on
// arm64.
var registerArgs = map[string]int{"amd64": 6, "arm64": 8}[runtime.GOARCH]

// trialProgram names the program tryFentry links, among ProgramNames so
// that the residue checks would see one left behind.
const trialProgram = "nettrace_trial"

// trampolineTrialTarget is the kernel function the whole-kernel trial
// links to: the syn point's, in vmlinux on every kernel nettrace runs on,
// with fewer arguments than any architecture passes in registers.
const trampolineTrialTarget = "tcp_conn_request"

// trampolinesAttach says why fentry cannot attach to any kernel function
// here, if it cannot, from one trial program linked and closed, once per
// Tracer. arm64 kernels without ftrace's direct calls (6.1) load fentry
// programs but refuse to link them to a kernel function (ENOTSUPP): each
// point would otherwise learn it only after loading its object, and say
// no more than that a feature is missing.
func (t *Tracer) trampolinesAttach() error {
	if !t.trampolinesTried {
		t.trampolinesTried = true
		switch err := tryFentry(trampolineTrialTarget); {
		case errors.Is(err, ebpf.ErrNotSupported):
			why := "this kernel's BPF trampolines do not attach to kernel functions (a trial link to " + trampolineTrialTarget + " is not supported)"
			if runtime.GOARCH == "arm64" {
				why += ": arm64's need ftrace's direct calls, which its 6.1 kernels lack"
			}
			t.trampolinesErr = errors.New(why)
		case err != nil:
			t.trampolinesErr = t.explain(MethodFentry, err)
		}
	}
	return t.trampolinesErr
}

// trampolinesTake returns a requires check that says why fentry cannot
// attach to one of funcs, if it cannot because of its argument count. A
// function not known from vmlinux's BTF to take at most registerArgs
// arguments (one in a module, or one with more) is tried with a program
// that does nothing, linked and closed at once: a trampoline that cannot
// take it refuses it at link (ENOTSUPP on 6.1), and without the check that
// would come after loading the point's whole object (0.6 s of a 6.1
// guest's attach). A kernel version would not do: distributions backport
// trampolines. It runs after trampolinesAttach, so that a refusal here is
// the arguments'.
func trampolinesTake(funcs ...string) func(t *Tracer) error {
	return func(t *Tracer) error {
		for _, fn := range funcs {
			if !t.syms.Has(fn) || vmlinuxParams(fn) <= registerArgs {
				continue
			}
			switch err := tryFentry(fn); {
			case errors.Is(err, ebpf.ErrNotSupported):
				return fmt.Errorf("this kernel's BPF trampolines cannot take %s's arguments, more than the %d passed in registers on %s",
					fn, registerArgs, runtime.GOARCH)
			case err != nil:
				return t.explain(MethodFentry, err)
			}
		}
		return nil
	}
}

// vmlinuxParams is how many parameters fn has in vmlinux's BTF, or more
// than registerArgs where that is unknown (fn is a module's, or there is no
// BTF).
func vmlinuxParams(fn string) int {
	unknown := registerArgs + 1
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return unknown
	}
	var f *btf.Func
	if spec.TypeByName(fn, &f) != nil {
		return unknown
	}
	proto, ok := f.Type.(*btf.FuncProto)
	if !ok {
		return unknown
	}
	return len(proto.Params)
}

// tryFentry links a program that does nothing to fn's entry, and closes
// it. A link the kernel cannot build is ebpf.ErrNotSupported.
func tryFentry(fn string) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         trialProgram,
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceFEntry,
		AttachTo:     fn,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		return err
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		return fmt.Errorf("link a trial program to %s: %w", fn, err)
	}
	return l.Close()
}
