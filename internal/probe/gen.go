package probe

// One object per BPF source in bpf/: one per observation point, one for
// the sites (tracepoints several points share, sites.go) and one for the
// journey flush (journey.go). The event layout (nt_event) is generated
// once, from the nat object: every object shares bpf/include/nettrace.h.
// Each is built again with the kernel gate (NAMEGate, -DNT_GATE:
// bpf/include/gate.h says why apart), loaded for --healthy count only; the
// gate's atomics need BPF v3 (Linux 5.12+). Each is built for amd64 and
// arm64 (bpfgen's -targets): bpf2go defines __TARGET_ARCH_x86 or
// __TARGET_ARCH_arm64 for the kprobes' register layouts, and the Go
// build takes the object of its GOARCH.
//go:generate go run ./internal/bpfgen -src ../../bpf -cflags "-O2 -g -Wall -Werror" -gate-cflags "-DNT_GATE -mcpu=v3" -types-in nat -types nt_event,nt_filter_insn
