/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What vmlinux.h, generated from an x86-64 kernel's BTF, lacks for the
 * other architecture the objects are built for. Every other type is the
 * same by name on both, and CO-RE relocates its fields against the
 * running kernel's own BTF: one header serves both.
 */
#ifndef NETTRACE_ARCH_H
#define NETTRACE_ARCH_H

#if defined(__TARGET_ARCH_arm64)
/* A kprobe's registers on arm64 (bpf_tracing.h casts its context to it):
 * the kernel's pt_regs starts with it. preserve_access_index relocates
 * the fields against the running kernel's type. */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
} __attribute__((preserve_access_index));
#endif

#endif
