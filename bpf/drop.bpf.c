// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * drop: every freed packet of a followed flow, with the kernel's drop
 * reason (named in Go from this kernel's BTF) and the freeing location.
 * Consumed packets are forgotten in the shared consume site (sites.bpf.c).
 */
#include "drop.h"

SEC("tp_btf/kfree_skb")
int BPF_PROG(drop_kfree, struct sk_buff *skb, void *location, enum skb_drop_reason reason)
{
	drop_seen(skb, location, reason, true);
	return 0;
}

SEC("tracepoint/skb/kfree_skb")
int drop_kfree_tp(struct trace_event_raw_kfree_skb *ctx)
{
	__u32 reason = 0;

	if (bpf_core_field_exists(ctx->reason))
		reason = ctx->reason;
	drop_seen((struct sk_buff *)ctx->skbaddr, ctx->location, reason, false);
	return 0;
}
