// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * drop: every freed packet of a followed flow, with the kernel's drop
 * reason (named in Go from this kernel's BTF) and the freeing location.
 * consume_skb only forgets the packet: its address may be recycled for an
 * unrelated packet that must inherit neither the following nor the identity.
 */
#include "common.h"

static __always_inline void drop_report(struct sk_buff *skb, struct net_device *dev, void *location,
					__u32 reason, bool direct)
{
	struct nt_event e;

	nt_init(&e, NT_POINT_DROP, NT_KIND_DROP, (__u64)skb);
	if (nt_observe_skb(skb, dev, false, &e, NULL, direct, true)) {
		e.u.drop.location = (__u64)location;
		e.u.drop.reason = reason;
		nt_submit_skb(&e, skb, false, direct);
	}
	nt_untrack_skb((__u64)skb);
	nt_forget_skb((__u64)skb);
}

static __always_inline void drop_seen(struct sk_buff *skb, void *location, __u32 reason, bool direct)
{
	struct net_device *dev = NT_RD(direct, skb, dev);

	/* A locally generated packet dropped before it has a device still has
	 * the device of its route: that names the namespace. That device is a
	 * plain address (read through the route), so probe reads only. */
	if (!dev) {
		drop_report(skb, nt_dst_dev(skb), location, reason, false);
		return;
	}
	drop_report(skb, dev, location, reason, direct);
}

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

SEC("tp_btf/consume_skb")
int BPF_PROG(drop_consume, struct sk_buff *skb)
{
	nt_untrack_skb((__u64)skb);
	nt_forget_skb((__u64)skb);
	return 0;
}
