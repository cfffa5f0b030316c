/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The dev point's handler: a packet entering or leaving a device, to follow
 * it across veth pairs, bridges and namespaces. Shared by dev.bpf.c and the
 * transmit site (sites.bpf.c).
 */
#ifndef NETTRACE_DEV_H
#define NETTRACE_DEV_H

#include "common.h"

/* On receive the tracepoint fires before the stack sets the network header;
 * skb->data already points at it. */
static __always_inline void dev_seen(struct sk_buff *skb, struct net_device *dev, __u8 kind, bool direct)
{
	nt_report_skb(skb, dev, NT_POINT_DEV, kind, kind == NT_KIND_DEV_RX, direct);
}

#endif
