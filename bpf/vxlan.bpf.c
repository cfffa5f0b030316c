// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * vxlan: a packet entering a vxlan device (inner tuple, device) and the
 * encapsulated packet built from it (outer tuple, VNI, remote VTEP). The
 * same skb carries both, so the Go side joins them by skb.
 *
 * Preferred: vxlan_xmit and udp_tunnel_xmit_skb, udp_tunnel6_xmit_skb for
 * an IPv6 underlay (fentry or kprobe).
 * Fallback: net_dev_start_xmit on a device whose link kind is "vxlan", and
 * on the underlay device for a packet that is vxlan on the wire (in the
 * shared transmit site, sites.bpf.c).
 */
#include "vxlan.h"

/* At udp_tunnel_xmit_skb (udp_tunnel6_xmit_skb) the vxlan header is at
 * skb->data and the inner packet at inner_network_header; the UDP and outer
 * IP headers do not exist yet, so the outer tuple comes from the arguments,
 * and the underlay device from the route (skb->dev is still the vxlan
 * device). The outer addresses are src and dst for an IPv4 underlay,
 * read from src6 and dst6 for an IPv6 one (written straight into the event:
 * the stack has no room for a copy). */
static __always_inline void vxlan_encap(struct dst_entry *route, struct sk_buff *skb, __u32 src, __u32 dst,
					const struct in6_addr *src6, const struct in6_addr *dst6, __u16 sport,
					__u16 dport)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	unsigned char *data = BPF_CORE_READ(skb, data);
	struct net_device *dev = BPF_CORE_READ(route, dev);
	__u8 vx[VXLAN_HLEN];
	NT_EVENT(e);
	__u32 netns = 0;

	if (!e)
		return;

	nt_init(e, NT_POINT_VXLAN, NT_KIND_VXLAN_ENCAP, (__u64)skb);
	if (!nt_read_ip(head, BPF_CORE_READ(skb, inner_network_header), &e->inner))
		return;
	e->flags |= NT_F_INNER;
	if (src6 && dst6) {
		BPF_CORE_READ_INTO(&e->tuple.saddr, src6, in6_u.u6_addr32);
		BPF_CORE_READ_INTO(&e->tuple.daddr, dst6, in6_u.u6_addr32);
		e->tuple.ipv6 = 1;
	} else {
		e->tuple.saddr[0] = src;
		e->tuple.daddr[0] = dst;
	}
	e->tuple.proto = IPPROTO_UDP;
	e->tuple.sport = sport;
	e->tuple.dport = dport;
	if (dev) {
		netns = nt_dev_netns(dev, false);
		if (!nt_netns_watched(netns))
			return;
	}
	if (nt_unremarkable(0, &e->tuple, &e->inner) || nt_follow(e->skb, nt_ct_of(skb, false), &e->tuple, &e->inner) != NT_REPORT)
		return;
	if (!bpf_probe_read_kernel(vx, sizeof(vx), data))
		e->u.vxlan.vni = (vx[4] << 16) | (vx[5] << 8) | vx[6];
	__builtin_memcpy(e->u.vxlan.remote, e->tuple.daddr, sizeof(e->u.vxlan.remote));
	__builtin_memcpy(e->u.vxlan.local, e->tuple.saddr, sizeof(e->u.vxlan.local));
	e->u.vxlan.port = dport;
	nt_fill_dev(dev, e);
	nt_submit(e);
}

SEC("fentry/vxlan_xmit")
int BPF_PROG(vxlan_fentry_xmit, struct sk_buff *skb, struct net_device *dev)
{
	vxlan_enter(skb, dev, true);
	return 0;
}

/* udp_tunnel_xmit_skb has 12 arguments: trampolines before Linux 6.3
 * take 6 at most, so there fentry is refused and the kprobe is used. */
SEC("fentry/udp_tunnel_xmit_skb")
int BPF_PROG(vxlan_fentry_tunnel, struct rtable *rt, struct sock *sk, struct sk_buff *skb,
	     __be32 src, __be32 dst, __u8 tos, __u8 ttl, __be16 df, __be16 src_port, __be16 dst_port)
{
	vxlan_encap(&rt->dst, skb, src, dst, NULL, NULL, bpf_ntohs(src_port), bpf_ntohs(dst_port));
	return 0;
}

/* The IPv6 underlay's: 12 arguments, 13 since ip6cb_flags was added, where
 * fentry is refused (trampolines take 12 at most) and the kprobe is used. */
SEC("fentry/udp_tunnel6_xmit_skb")
int BPF_PROG(vxlan_fentry_tunnel6, struct dst_entry *route, struct sock *sk, struct sk_buff *skb,
	     struct net_device *dev, struct in6_addr *saddr, struct in6_addr *daddr, __u8 prio, __u8 ttl,
	     __be32 label, __be16 src_port, __be16 dst_port)
{
	vxlan_encap(route, skb, 0, 0, saddr, daddr, bpf_ntohs(src_port), bpf_ntohs(dst_port));
	return 0;
}

SEC("kprobe/vxlan_xmit")
int BPF_KPROBE(vxlan_kprobe_xmit, struct sk_buff *skb, struct net_device *dev)
{
	vxlan_enter(skb, dev, false);
	return 0;
}

/* The UDP ports are the 9th and 10th arguments: on the stack on x86-64
 * and arm64 alike (args.h). */
SEC("kprobe/udp_tunnel_xmit_skb")
int BPF_KPROBE(vxlan_kprobe_tunnel, struct rtable *rt, struct sock *sk, struct sk_buff *skb,
	       __be32 src, __be32 dst)
{
	__be16 sport = 0, dport = 0;

	bpf_probe_read_kernel(&sport, sizeof(sport), (void *)NT_KPROBE_STACK_ARG(ctx, 9));
	bpf_probe_read_kernel(&dport, sizeof(dport), (void *)NT_KPROBE_STACK_ARG(ctx, 10));
	vxlan_encap(&rt->dst, skb, src, dst, NULL, NULL, bpf_ntohs(sport), bpf_ntohs(dport));
	return 0;
}

/* The IPv6 underlay's ports are its 10th and 11th arguments (with 12
 * arguments or 13). BPF_KPROBE names five arguments: the sixth, daddr, is
 * in a register (args.h). */
SEC("kprobe/udp_tunnel6_xmit_skb")
int BPF_KPROBE(vxlan_kprobe_tunnel6, struct dst_entry *route, struct sock *sk, struct sk_buff *skb,
	       struct net_device *dev, struct in6_addr *saddr)
{
	struct in6_addr *daddr = (struct in6_addr *)NT_KPROBE_ARG6(ctx);
	__be16 sport = 0, dport = 0;

	bpf_probe_read_kernel(&sport, sizeof(sport), (void *)NT_KPROBE_STACK_ARG(ctx, 10));
	bpf_probe_read_kernel(&dport, sizeof(dport), (void *)NT_KPROBE_STACK_ARG(ctx, 11));
	vxlan_encap(route, skb, 0, 0, saddr, daddr, bpf_ntohs(sport), bpf_ntohs(dport));
	return 0;
}
