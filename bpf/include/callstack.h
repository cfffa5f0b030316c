/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Per-CPU stacks of open kprobe calls, for the kretprobe methods.
 */
#ifndef NETTRACE_CALLSTACK_H
#define NETTRACE_CALLSTACK_H

#include "base.h"

/* Entry state of a kprobe/kretprobe pair. kretprobes have no arguments, and
 * the entry cannot be keyed by pid_tgid: it is 0 for every softirq, so two
 * CPUs' softirqs or a softirq nested in a process's call would overwrite each
 * other. Instead each CPU keeps a stack of open calls: a softirq that
 * interrupts a call on this CPU returns before the call it interrupted, so
 * calls end in the reverse order they began (LIFO). */
#define NT_CALL_DEPTH 8

struct nt_call {
	__u64 obj;   /* the object the call is about (skb, socket) */
	__u64 aux;   /* a second argument (namespace, socket) */
	__u32 v[4];  /* per-probe values taken at entry */
};

struct nt_call_stack {
	__u32 depth;
	__u32 _pad;
	struct nt_call calls[NT_CALL_DEPTH];
};

#define NT_CALL_STACK(name)                                   \
	struct {                                              \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);      \
		__uint(max_entries, 1);                       \
		__type(key, __u32);                           \
		__type(value, struct nt_call_stack);          \
	} name SEC(".maps")

static __always_inline void nt_call_push(void *stacks, const struct nt_call *c)
{
	__u32 key = 0;
	struct nt_call_stack *s = bpf_map_lookup_elem(stacks, &key);
	__u32 d;

	if (!s)
		return;
	d = s->depth;
	/* A deeper nesting than NT_CALL_DEPTH is not possible for these
	 * functions; counting it keeps the pops balanced if it happens. The
	 * masked index is for the verifier, which needs a bound it can see. */
	if (d < NT_CALL_DEPTH)
		s->calls[d & (NT_CALL_DEPTH - 1)] = *c;
	s->depth = d + 1;
}

/* Pops the innermost open call into c; false when there is none or it
 * was not recorded. */
static __always_inline bool nt_call_pop(void *stacks, struct nt_call *c)
{
	__u32 key = 0;
	struct nt_call_stack *s = bpf_map_lookup_elem(stacks, &key);
	__u32 d;

	if (!s || s->depth == 0)
		return false;
	d = --s->depth;
	if (d >= NT_CALL_DEPTH)
		return false;
	*c = s->calls[d & (NT_CALL_DEPTH - 1)];
	return true;
}

#endif
