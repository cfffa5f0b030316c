/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The drop point's handlers: every freed packet of a followed flow, with
 * the kernel's drop reason and the freeing location; and the end of a
 * consumed packet, which only forgets it: its address may be recycled for
 * an unrelated packet that must inherit neither the following nor the
 * identity. Shared by drop.bpf.c and the consume site (sites.bpf.c).
 */
#ifndef NETTRACE_DROP_H
#define NETTRACE_DROP_H

#include "common.h"

static __always_inline void drop_report(struct sk_buff *skb, struct net_device *dev, void *location,
					__u32 reason, bool direct)
{
	NT_EVENT(e);
	struct net_device *out;
	__u32 mtu;

	if (!e)
		return;

	nt_init_decision(e);
	if (nt_decide_skb(skb, dev, false, e, NULL, direct, true)) {
		nt_init_rest(e, NT_POINT_DROP, NT_KIND_DROP, (__u64)skb);
		nt_fill_skb(e, skb, dev);
		e->u.drop.location = (__u64)location;
		e->u.drop.reason = reason;
		out = nt_dst_dev(skb);
		if (out) {
			e->u.drop.dst_ifindex = BPF_CORE_READ(out, ifindex);
			mtu = BPF_CORE_READ(out, mtu);
			e->u.drop.dst_mtu = mtu > 0xffff ? 0xffff : mtu;
		}
		nt_submit_skb_as(e, skb, false, direct, nt_drop_failure(e));
	}
	nt_journey_end((__u64)skb);
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

static __always_inline void drop_consumed(struct sk_buff *skb)
{
	nt_journey_end((__u64)skb);
	nt_untrack_skb((__u64)skb);
	nt_forget_skb((__u64)skb);
}

#endif
