/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The common path of the skb-based points (parse, filter, follow, fill) over
 * the helpers, one header per concern: base.h (settings, field reads),
 * maps.h, parse.h, filter.h, event.h, follow.h and callstack.h.
 */
#ifndef NETTRACE_COMMON_H
#define NETTRACE_COMMON_H

#include "base.h"
#include "maps.h"
#include "parse.h"
#include "filter.h"
#include "event.h"
#include "follow.h"
#include "callstack.h"

/* Whether the skb-based points report a packet: parse, filter and follow,
 * on an event cleared by nt_init_decision only. */
static __always_inline bool nt_decide_skb(struct sk_buff *skb, struct net_device *dev, bool use_data,
					  struct nt_event *e, __u32 *vni, bool direct, bool dropping)
{
	__u64 ct;
	int verdict;

	if (!skb || !nt_parse_skb(skb, use_data, e, vni, direct))
		return false;
	ct = nt_ct_of(skb, direct);
	if (!dropping && nt_unremarkable(ct, &e->tuple, nt_inner(e)))
		return false;
	/* The namespace is needed before the filter only when namespaces are
	 * restricted; otherwise nt_fill_dev reads it for reported events. */
	if (dev && netns_filter) {
		e->netns = nt_dev_netns(dev, direct);
		if (!nt_netns_watched(e->netns))
			return false;
	}
	verdict = nt_follow((__u64)skb, ct, &e->tuple, nt_inner(e));
	return verdict == NT_REPORT || (verdict == NT_QUIET && dropping);
}

/* Fills what every skb-based point reports, after nt_init_rest. */
static __always_inline void nt_fill_skb(struct nt_event *e, struct sk_buff *skb, struct net_device *dev)
{
	__u8 pkt_type;

	nt_fill_ct(skb, e);
	nt_fill_dev(dev, e);
	/* A subnet broadcast's address says nothing; the link layer does. */
	pkt_type = BPF_CORE_READ_BITFIELD_PROBED(skb, pkt_type);
	if (pkt_type == PACKET_BROADCAST || pkt_type == PACKET_MULTICAST)
		e->flags |= NT_F_GROUP;
}

/* Makes a packet decided on (nt_decide_skb) one event of a point and kind,
 * filled with what every skb-based point reports: all but its payload. */
static __always_inline void nt_fill_decided(struct nt_event *e, struct sk_buff *skb, struct net_device *dev,
					    __u8 point, __u8 kind)
{
	nt_init_rest(e, point, kind, (__u64)skb);
	nt_fill_skb(e, skb, dev);
}

/* Reports a packet decided on as one event of a point and kind, without a
 * payload. */
static __always_inline void nt_report_decided(struct nt_event *e, struct sk_buff *skb, struct net_device *dev,
					      __u8 point, __u8 kind, bool use_data, bool direct)
{
	nt_fill_decided(e, skb, dev, point, kind);
	nt_submit_skb(e, skb, use_data, direct);
}

/* Reports the event just submitted (nt_report_decided) again as another
 * point's, without a payload: the same packet seen at the same device and
 * hook by two points is one parse, one decision and one fill. Submitting
 * changes no field it does not set again (time, identity, CPU, capture
 * length, the wide flag). */
static __always_inline void nt_report_again(struct nt_event *e, struct sk_buff *skb, __u8 point, __u8 kind,
					    bool use_data, bool direct)
{
	e->point = point;
	e->kind = kind;
	__builtin_memset(&e->u, 0, sizeof(e->u));
	nt_submit_skb(e, skb, use_data, direct);
}

/* Reports a packet seen at a device as one event of a point and kind, when
 * it is remarkable. use_data: the network header is at skb->data, not set
 * yet (on receive). */
static __always_inline void nt_report_skb(struct sk_buff *skb, struct net_device *dev, __u8 point, __u8 kind,
					  bool use_data, bool direct)
{
	NT_EVENT(e);

	if (!e)
		return;

	nt_init_decision(e);
	if (nt_decide_skb(skb, dev, use_data, e, NULL, direct, false))
		nt_report_decided(e, skb, dev, point, kind, use_data, direct);
}

#endif
