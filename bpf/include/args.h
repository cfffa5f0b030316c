/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * A kprobe's arguments past the five bpf_tracing.h names (libbpf 1.1's
 * PT_REGS_PARM1..5), by the kernel's calling convention on each
 * architecture bpf2go builds for (__TARGET_ARCH_*):
 * - x86-64 passes six arguments in registers, the sixth in r9, and the
 *   rest on the stack above the return address, one 8-byte slot each:
 *   argument 7 at sp+8;
 * - arm64 (AAPCS64) passes eight in x0-x7 and the rest on the stack from
 *   sp, one 8-byte slot each: argument 9 at sp.
 */
#ifndef NETTRACE_ARGS_H
#define NETTRACE_ARGS_H

#if defined(__TARGET_ARCH_x86)
#define NT_KPROBE_ARG6(ctx) ((ctx)->r9)
/* The return address is the slot at sp. */
#define NT_STACK_SLOT(n) ((n) - 6)
#elif defined(__TARGET_ARCH_arm64)
#define NT_KPROBE_ARG6(ctx) (__PT_REGS_CAST(ctx)->regs[5])
#define NT_STACK_SLOT(n) ((n) - 9)
#else
#error "nettrace's kprobes know the argument layout of x86-64 and arm64 only"
#endif

/* The address of argument n, one passed on the stack on both (n > 8): the
 * assertion keeps an argument arm64 passes in a register from being read
 * off its stack. */
#define NT_KPROBE_STACK_ARG(ctx, n)                                                      \
	({                                                                               \
		_Static_assert((n) > 8, "argument " #n " is passed in a register on arm64"); \
		PT_REGS_SP(ctx) + 8 * NT_STACK_SLOT(n);                                  \
	})

#endif
