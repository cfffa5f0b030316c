package probe

// One object per observation point, compiled from bpf/, one for the sites
// (tracepoints several points share, sites.go) and one for the journey
// flush (journey.go). The event layout
// (nt_event) is generated once, from the nat object: every object shares
// bpf/include/nettrace.h. Each is built again with the kernel gate
// (NAMEGate, -DNT_GATE: bpf/include/gate.h says why apart), loaded for
// --healthy count only.
//go:generate -command bpf go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types
//go:generate -command bpfgate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE -mcpu=v3" -target bpfel -no-global-types
//go:generate bpf -type nt_event -type nt_filter_insn nat ../../bpf/nat.bpf.c -- -I../../bpf/include -I../..
//go:generate bpf route ../../bpf/route.bpf.c -- -I../../bpf/include -I../..
//go:generate bpf vxlan ../../bpf/vxlan.bpf.c -- -I../../bpf/include -I../..
//go:generate bpf syn ../../bpf/syn.bpf.c -- -I../../bpf/include -I../..
//go:generate bpf drop ../../bpf/drop.bpf.c -- -I../../bpf/include -I../..
//go:generate bpf dev ../../bpf/dev.bpf.c -- -I../../bpf/include -I../..
//go:generate bpf tcp ../../bpf/tcp.bpf.c -- -I../../bpf/include -I../..
//go:generate bpf sites ../../bpf/sites.bpf.c -- -I../../bpf/include -I../..
//go:generate bpf journey ../../bpf/journey.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate natGate ../../bpf/nat.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate routeGate ../../bpf/route.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate vxlanGate ../../bpf/vxlan.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate synGate ../../bpf/syn.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate dropGate ../../bpf/drop.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate devGate ../../bpf/dev.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate tcpGate ../../bpf/tcp.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate sitesGate ../../bpf/sites.bpf.c -- -I../../bpf/include -I../..
//go:generate bpfgate journeyGate ../../bpf/journey.bpf.c -- -I../../bpf/include -I../..
