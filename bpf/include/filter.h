/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The in-kernel filter: the postfix program compiled from the user's
 * expression, and the watched namespaces.
 */
#ifndef NETTRACE_FILTER_H
#define NETTRACE_FILTER_H

#include "maps.h"

static __always_inline bool nt_port_match(__u16 p, const volatile struct nt_filter_insn *in)
{
	return p >= in->port && p <= in->port_end;
}

/* Whether an address is in a host or net instruction's network. An IPv4
 * address and mask have zero in their last three words. */
static __always_inline bool nt_addr_in(const __u32 *a, const volatile struct nt_filter_insn *in)
{
	return (a[0] & in->mask[0]) == in->addr[0] && (a[1] & in->mask[1]) == in->addr[1] &&
	       (a[2] & in->mask[2]) == in->addr[2] && (a[3] & in->mask[3]) == in->addr[3];
}

static __always_inline bool nt_insn_match(const struct nt_tuple *t,
					  const volatile struct nt_filter_insn *in)
{
	bool src, dst;

	switch (in->op) {
	case NT_OP_PROTO:
		return t->proto == in->proto;
	case NT_OP_HOST:
		if (t->ipv6 != in->ipv6)
			return false;
		src = nt_addr_in(t->saddr, in);
		dst = nt_addr_in(t->daddr, in);
		break;
	case NT_OP_PORT:
		if (t->proto != IPPROTO_TCP && t->proto != IPPROTO_UDP)
			return false;
		src = nt_port_match(t->sport, in);
		dst = nt_port_match(t->dport, in);
		break;
	default:
		return false;
	}
	if (in->dir == NT_DIR_SRC)
		return src;
	if (in->dir == NT_DIR_DST)
		return dst;
	return src || dst;
}

/* Evaluates the postfix filter program on a tuple. The bit stack is a u64:
 * push shifts left, and/or fold the two top bits, not flips the top bit. */
static __always_inline bool nt_filter_match(const struct nt_tuple *t)
{
	__u64 stack = 0;
	__u64 a, b;

	if (filter_len == 0)
		return true;
	/* Bounded by NT_FILTER_MAX so the verifier can see the loop end. */
	for (__u32 i = 0; i < NT_FILTER_MAX; i++) {
		if (i >= filter_len)
			break;
		const volatile struct nt_filter_insn *in = &filter_prog[i];

		switch (in->op) {
		case NT_OP_AND:
		case NT_OP_OR:
			a = stack & 1;
			b = (stack >> 1) & 1;
			stack >>= 2;
			stack = (stack << 1) | (in->op == NT_OP_AND ? (a & b) : (a | b));
			break;
		case NT_OP_NOT:
			stack ^= 1;
			break;
		default:
			stack = (stack << 1) | (nt_insn_match(t, in) ? 1 : 0);
		}
	}
	return stack & 1;
}

static __always_inline bool nt_netns_watched(__u32 inum)
{
	if (!netns_filter)
		return true;
	return bpf_map_lookup_elem(&watched_netns, &inum) != NULL;
}

#endif
