package probe

// One object per observation point, compiled from bpf/, one for the sites
// (tracepoints several points share, sites.go) and one for the journey
// flush (journey.go). The event layout
// (nt_event) is generated once, from the nat object: every object shares
// bpf/include/nettrace.h. Each is built again with the kernel gate
// (NAMEGate, -DNT_GATE: bpf/include/gate.h says why apart), loaded for
// --healthy count only.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types -type nt_event -type nt_filter_insn nat ../../bpf/nat.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types route ../../bpf/route.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types vxlan ../../bpf/vxlan.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types syn ../../bpf/syn.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types drop ../../bpf/drop.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types dev ../../bpf/dev.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types tcp ../../bpf/tcp.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types sites ../../bpf/sites.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target bpfel -no-global-types journey ../../bpf/journey.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types natGate ../../bpf/nat.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types routeGate ../../bpf/route.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types vxlanGate ../../bpf/vxlan.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types synGate ../../bpf/syn.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types dropGate ../../bpf/drop.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types devGate ../../bpf/dev.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types tcpGate ../../bpf/tcp.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types sitesGate ../../bpf/sites.bpf.c -- -I../../bpf/include -I../..
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DNT_GATE" -target bpfel -no-global-types journeyGate ../../bpf/journey.bpf.c -- -I../../bpf/include -I../..
