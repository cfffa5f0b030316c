/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The vxlan point's handlers for a packet handed to a vxlan device, shared
 * by vxlan.bpf.c (fentry, kprobe on vxlan_xmit) and the transmit site
 * (sites.bpf.c: the tracepoint method).
 */
#ifndef NETTRACE_VXLAN_H
#define NETTRACE_VXLAN_H

#include "common.h"

/* A packet handed to a vxlan device (the fentry and kprobe methods). */
static __always_inline void vxlan_enter(struct sk_buff *skb, struct net_device *dev, bool direct)
{
	nt_report_skb(skb, dev, NT_POINT_VXLAN, NT_KIND_VXLAN_ENTER, false, direct);
}

/* The link operations every vxlan device shares, learnt from the first
 * device whose kind reads "vxlan": from then on, telling a vxlan device is
 * one comparison instead of a string read per transmitted packet. (The
 * symbol is not in kallsyms when vxlan is built in.) */
__u64 vxlan_ops;

static __always_inline bool vxlan_is_vxlan_dev(struct net_device *dev)
{
	const struct rtnl_link_ops *ops = dev->rtnl_link_ops;
	char name[6] = {};
	const char *kind;

	/* Physical devices and loopback have no link operations. */
	if (!ops)
		return false;
	if (vxlan_ops)
		return (__u64)ops == vxlan_ops;
	kind = ops->kind;
	if (!kind || bpf_probe_read_kernel_str(name, sizeof(name), kind) < 0)
		return false;
	if (name[0] == 'v' && name[1] == 'x' && name[2] == 'l' && name[3] == 'a' && name[4] == 'n' && name[5] == 0) {
		vxlan_ops = (__u64)ops;
		return true;
	}
	return false;
}

#define ETH_P_TEB 0x6558

/* Reports the encapsulated packet leaving the underlay device, decided on
 * (nt_decide_skb, which found its inner tuple and VNI): the skb a vxlan
 * device was handed, now with the outer headers. */
static __always_inline void vxlan_report_encap(struct nt_event *e, struct sk_buff *skb, struct net_device *dev,
					       __u32 vni)
{
	nt_fill_decided(e, skb, dev, NT_POINT_VXLAN, NT_KIND_VXLAN_ENCAP);
	e->u.vxlan.vni = vni;
	__builtin_memcpy(e->u.vxlan.remote, e->tuple.daddr, sizeof(e->u.vxlan.remote));
	__builtin_memcpy(e->u.vxlan.local, e->tuple.saddr, sizeof(e->u.vxlan.local));
	e->u.vxlan.port = e->tuple.dport;
	nt_submit_skb(e, skb, false, true);
}

/* What a transmitted packet is to the vxlan point (the tracepoint method,
 * at net_dev_start_xmit): a packet handed to a vxlan device enters it
 * (NT_KIND_VXLAN_ENTER); the same skb leaving the underlay device is the
 * encapsulated packet (NT_KIND_VXLAN_ENCAP, when the parse finds an inner
 * packet); anything else is nothing to it (0). Every packet the host sends
 * passes here, and few are either: a few field reads. */
static __always_inline __u8 vxlan_xmit_kind(struct sk_buff *skb, struct net_device *dev)
{
	if (vxlan_is_vxlan_dev(dev))
		return NT_KIND_VXLAN_ENTER;
	/* vxlan sets the inner protocol of every packet it encapsulates (a
	 * new skb has none), and scrubs the skb as it does (skb_scrub_packet,
	 * both families), which zeroes skb_iif. A packet received since,
	 * decapsulated or forwarded (an underlay router's), carries the device
	 * it came in on and the inner protocol still: it is not this host's
	 * encapsulation. So the two say what an LRU map of the skbs handed to a
	 * vxlan device said, for less than that map's update, lookup and
	 * delete per tunnelled packet cost (a sixth of site_xmit's time). */
	if (skb->inner_protocol != bpf_htons(ETH_P_TEB) || skb->skb_iif)
		return 0;
	return NT_KIND_VXLAN_ENCAP;
}

#endif
