// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * route: the re-route NAT triggers in OUTPUT (ip_route_me_harder), with the
 * device, gateway and error it chose.
 *
 * Preferred: fexit or kretprobe on ip_route_me_harder. Fallback: the FIB
 * lookup tracepoint, attributed to the packet whose OUTPUT NAT is in
 * progress on this CPU (ip_route_me_harder runs inside the NAT hook, between
 * the nat point's two halves), or matched on the lookup's own tuple.
 */
#include "common.h"

#define RT_TABLE_LOCAL 255

static __always_inline void route_fill_dst(struct sk_buff *skb, struct nt_event *e)
{
	struct dst_entry *dst = (struct dst_entry *)(BPF_CORE_READ(skb, _skb_refdst) & ~1UL);
	struct rtable *rt = (struct rtable *)dst;
	struct net_device *dev;

	if (!dst)
		return;
	dev = BPF_CORE_READ(dst, dev);
	if (dev) {
		e->u.route.oif = BPF_CORE_READ(dev, ifindex);
		bpf_probe_read_kernel_str(e->u.route.oifname, sizeof(e->u.route.oifname), dev->name);
	}
	if (BPF_CORE_READ(rt, rt_gw_family) == 2 /* AF_INET */)
		e->u.route.gateway[0] = BPF_CORE_READ(rt, rt_gw4);
}

static __always_inline void reroute_done(struct net *net, struct sk_buff *skb, int err, bool direct)
{
	NT_EVENT(e);
	__u32 netns = BPF_CORE_READ(net, ns.inum);

	if (!e)
		return;

	if (!nt_netns_watched(netns))
		return;
	nt_init(e, NT_POINT_ROUTE, NT_KIND_ROUTE_REROUTE, (__u64)skb);
	e->hook = NF_INET_LOCAL_OUT;
	e->netns = netns;
	if (!nt_parse_skb(skb, false, e, NULL, direct))
		return;
	if (nt_unremarkable(nt_ct_of(skb, direct), &e->tuple, NULL) ||
	    nt_follow(e->skb, nt_ct_of(skb, direct), &e->tuple, NULL) != NT_REPORT)
		return;
	nt_fill_ct(skb, e);
	e->u.route.err = err;
	__builtin_memcpy(e->u.route.saddr, e->tuple.saddr, sizeof(e->u.route.saddr));
	route_fill_dst(skb, e);
	nt_submit_skb(e, skb, false, direct);
}

SEC("fexit/ip_route_me_harder")
int BPF_PROG(route_fexit, struct net *net, struct sock *sk, struct sk_buff *skb,
	     unsigned int addr_type, int ret)
{
	reroute_done(net, skb, ret, true);
	return 0;
}

/* kretprobe has no arguments: the entry leaves them on this CPU's call
 * stack (see nt_call_push). */
NT_CALL_STACK(reroute_calls);

SEC("kprobe/ip_route_me_harder")
int BPF_KPROBE(route_kprobe, struct net *net, struct sock *sk, struct sk_buff *skb)
{
	struct nt_call call = { .obj = (__u64)skb, .aux = (__u64)net };

	nt_call_push(&reroute_calls, &call);
	return 0;
}

SEC("kretprobe/ip_route_me_harder")
int BPF_KRETPROBE(route_kretprobe, int ret)
{
	struct nt_call call;

	if (nt_call_pop(&reroute_calls, &call))
		reroute_done((struct net *)call.aux, (struct sk_buff *)call.obj, ret, false);
	return 0;
}

SEC("tp_btf/fib_table_lookup")
int BPF_PROG(route_fib_lookup, u32 table, const struct flowi4 *flp,
	     const struct fib_nh_common *nhc, int err)
{
	__u32 hook = NF_INET_LOCAL_OUT;
	struct nat_slot *slot = bpf_map_lookup_elem(&nat_slots, &hook);
	struct net_device *dev = NULL;
	NT_EVENT(e);

	if (!e)
		return 0;

	nt_init(e, NT_POINT_ROUTE, NT_KIND_ROUTE_LOOKUP, 0);
	e->tuple.saddr[0] = flp->saddr;
	e->tuple.daddr[0] = flp->daddr;
	e->tuple.proto = flp->__fl_common.flowic_proto;
	e->tuple.sport = bpf_ntohs(flp->uli.ports.sport);
	e->tuple.dport = bpf_ntohs(flp->uli.ports.dport);
	/* Address-type checks (inet_addr_type) look up the local table; they
	 * are not routing decisions. */
	if (table == RT_TABLE_LOCAL)
		return 0;
	/* The re-route a DNAT in OUTPUT triggers looks up the packet's
	 * source (or none) and its new destination: a lookup on this CPU
	 * inside the window that does not (a softirq's input route, or any
	 * lookup after a NAT that dropped its packet, whose window stays open)
	 * is not that packet's. */
	if (slot && slot->active && slot->followed && !slot->pre.ipv6 &&
	    (!flp->saddr || flp->saddr == slot->pre.saddr[0]) && flp->daddr != slot->pre.daddr[0]) {
		e->skb = slot->skb;
		e->hook = NF_INET_LOCAL_OUT;
	} else if (!filter_len || !nt_filter_match(&e->tuple)) {
		/* Unattributed lookups are reported only for an explicit match:
		 * with no filter they would be one per routed packet. */
		return 0;
	}
	if (nhc) {
		dev = BPF_CORE_READ(nhc, nhc_dev);
		if (BPF_CORE_READ(nhc, nhc_gw_family) == 2 /* AF_INET */)
			e->u.route.gateway[0] = BPF_CORE_READ(nhc, nhc_gw.ipv4);
	}
	if (dev) {
		e->netns = nt_dev_netns(dev, false);
		if (!nt_netns_watched(e->netns))
			return 0;
		e->u.route.oif = BPF_CORE_READ(dev, ifindex);
		bpf_probe_read_kernel_str(e->u.route.oifname, sizeof(e->u.route.oifname), dev->name);
	}
	e->u.route.saddr[0] = e->tuple.saddr[0];
	e->u.route.err = err;
	e->u.route.table = table;
	nt_submit(e);
	return 0;
}
