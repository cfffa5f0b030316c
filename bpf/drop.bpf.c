// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * drop: every freed packet of a followed flow, with the kernel's drop
 * reason (named in Go from this kernel's BTF) and the freeing location.
 * consume_skb only forgets the packet: its address may be recycled for an
 * unrelated packet that must not inherit the following.
 */
#include "common.h"

static __always_inline void drop_seen(struct sk_buff *skb, void *location, __u32 reason)
{
	struct nt_event e;

	struct net_device *dev = BPF_CORE_READ(skb, dev);

	/* A locally generated packet dropped before it has a device still has
	 * the device of its route: that names the namespace. */
	if (!dev)
		dev = nt_dst_dev(skb);
	nt_init(&e, NT_POINT_DROP, NT_KIND_DROP, (__u64)skb);
	if (nt_observe_skb(skb, dev, false, &e, NULL)) {
		e.u.drop.location = (__u64)location;
		e.u.drop.reason = reason;
		nt_submit_skb(&e, skb, false);
	}
	nt_untrack_skb((__u64)skb);
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(drop_kfree, struct sk_buff *skb, void *location, enum skb_drop_reason reason)
{
	drop_seen(skb, location, reason);
	return 0;
}

SEC("tracepoint/skb/kfree_skb")
int drop_kfree_tp(struct trace_event_raw_kfree_skb *ctx)
{
	__u32 reason = 0;

	if (bpf_core_field_exists(ctx->reason))
		reason = ctx->reason;
	drop_seen((struct sk_buff *)ctx->skbaddr, ctx->location, reason);
	return 0;
}

SEC("tp_btf/consume_skb")
int BPF_PROG(drop_consume, struct sk_buff *skb)
{
	nt_untrack_skb((__u64)skb);
	return 0;
}
