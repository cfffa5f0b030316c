// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * route: the re-route NAT triggers in OUTPUT (ip_route_me_harder, and
 * ip6_route_me_harder for IPv6), with the device, gateway and error it
 * chose.
 *
 * Preferred: fexit or kretprobe on both functions. Fallback (IPv4): the FIB
 * lookup tracepoint, attributed to the packet whose OUTPUT NAT is in
 * progress on this CPU (ip_route_me_harder runs inside the NAT hook, between
 * the nat point's two halves), or matched on the lookup's own tuple.
 */
#include "common.h"

#define RT_TABLE_LOCAL 255

static __always_inline void route_fill_dst(struct sk_buff *skb, struct nt_event *e)
{
	struct dst_entry *dst = (struct dst_entry *)(BPF_CORE_READ(skb, _skb_refdst) & ~1UL);
	struct net_device *dev;

	if (!dst)
		return;
	dev = BPF_CORE_READ(dst, dev);
	if (dev) {
		e->u.route.oif = BPF_CORE_READ(dev, ifindex);
		bpf_probe_read_kernel_str(e->u.route.oifname, sizeof(e->u.route.oifname), dev->name);
	}
	/* The dst is the first member of the family's route: struct rtable
	 * for IPv4, struct rt6_info for IPv6 (its gateway is :: when the
	 * destination is on link). */
	if (e->tuple.ipv6) {
		struct rt6_info *rt6 = (struct rt6_info *)dst;

		BPF_CORE_READ_INTO(&e->u.route.gateway, rt6, rt6i_gateway.in6_u.u6_addr32);
		return;
	}
	if (BPF_CORE_READ((struct rtable *)dst, rt_gw_family) == 2 /* AF_INET */)
		e->u.route.gateway[0] = BPF_CORE_READ((struct rtable *)dst, rt_gw4);
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

SEC("fexit/ip6_route_me_harder")
int BPF_PROG(route6_fexit, struct net *net, struct sock *sk, struct sk_buff *skb, int ret)
{
	reroute_done(net, skb, ret, true);
	return 0;
}

/* kretprobe has no arguments: the entry leaves them on this CPU's call
 * stack (see nt_call_push). One stack serves both families: the calls
 * never nest. */
NT_CALL_STACK(reroute_calls);

static __always_inline void reroute_enter(struct net *net, struct sk_buff *skb)
{
	struct nt_call call = { .obj = (__u64)skb, .aux = (__u64)net };

	nt_call_push(&reroute_calls, &call);
}

static __always_inline void reroute_return(int ret)
{
	struct nt_call call;

	if (nt_call_pop(&reroute_calls, &call))
		reroute_done((struct net *)call.aux, (struct sk_buff *)call.obj, ret, false);
}

SEC("kprobe/ip_route_me_harder")
int BPF_KPROBE(route_kprobe, struct net *net, struct sock *sk, struct sk_buff *skb)
{
	reroute_enter(net, skb);
	return 0;
}

SEC("kretprobe/ip_route_me_harder")
int BPF_KRETPROBE(route_kretprobe, int ret)
{
	reroute_return(ret);
	return 0;
}

SEC("kprobe/ip6_route_me_harder")
int BPF_KPROBE(route6_kprobe, struct net *net, struct sock *sk, struct sk_buff *skb)
{
	reroute_enter(net, skb);
	return 0;
}

SEC("kretprobe/ip6_route_me_harder")
int BPF_KRETPROBE(route6_kretprobe, int ret)
{
	reroute_return(ret);
	return 0;
}

/* route_may_be_reroute says whether lookup t may be the re-route of the
 * packet whose OUTPUT NAT is in progress on this CPU (slot). The re-route a
 * DNAT in OUTPUT triggers looks up the packet's source (or none) and its new
 * destination: a lookup inside the window that does not (a softirq's input
 * route, or any lookup after a NAT that dropped its packet, whose window
 * stays open) is not that packet's. route_in_slot_netns says the rest. */
static __always_inline bool route_may_be_reroute(const struct nat_slot *slot, const struct nt_tuple *t)
{
	__u32 any[4] = {};

	if (!slot || !slot->active || !slot->followed || slot->pre.ipv6 != t->ipv6)
		return false;
	if (!nt_same_addr(t->saddr, any) && !nt_same_addr(t->saddr, slot->pre.saddr))
		return false;
	return !nt_same_addr(t->daddr, slot->pre.daddr);
}

/* Every namespace's OUTPUT shares the window: a lookup whose device is in
 * another namespace (a socket's connect there) is not the re-route; a
 * failed lookup has no device to tell by. */
static __always_inline bool route_in_slot_netns(const struct nat_slot *slot, struct net_device *dev)
{
	return !dev || nt_dev_netns(dev, false) == slot->netns;
}

/* route_lookup_wanted decides on lookup t before anything more is read or
 * an event set up: a node looks up a route for every packet it forwards,
 * and almost none is reported. Wanted are the re-route of the packet whose
 * OUTPUT NAT is in progress on this CPU (*slot is then that NAT's window)
 * and, only with a filter, the lookups it matches (with none it would be
 * one per routed packet). */
static __always_inline bool route_lookup_wanted(const struct nt_tuple *t, __u32 table, struct nat_slot **slot)
{
	__u32 hook = NF_INET_LOCAL_OUT;

	/* Address-type checks (inet_addr_type) look up the local table; they
	 * are not routing decisions. */
	if (table == RT_TABLE_LOCAL)
		return false;
	*slot = bpf_map_lookup_elem(&nat_slots, &hook);
	if (route_may_be_reroute(*slot, t))
		return true;
	*slot = NULL;
	return filter_len && nt_filter_match(t);
}

/* route_lookup_report reports wanted lookup e, whose tuple, gateway and
 * device it holds; slot is the NAT window it may be the re-route in. */
static __always_inline void route_lookup_report(struct nt_event *e, struct nat_slot *slot, struct net_device *dev,
						int err, __u32 table)
{
	if (slot && route_in_slot_netns(slot, dev)) {
		e->skb = slot->skb;
		e->hook = NF_INET_LOCAL_OUT;
	} else if (!filter_len || !nt_filter_match(&e->tuple)) {
		return;
	}
	if (dev) {
		e->netns = nt_dev_netns(dev, false);
		if (!nt_netns_watched(e->netns))
			return;
		e->u.route.oif = BPF_CORE_READ(dev, ifindex);
		bpf_probe_read_kernel_str(e->u.route.oifname, sizeof(e->u.route.oifname), dev->name);
	}
	__builtin_memcpy(e->u.route.saddr, e->tuple.saddr, sizeof(e->u.route.saddr));
	e->u.route.err = err;
	e->u.route.table = table;
	nt_submit(e);
}

SEC("tp_btf/fib_table_lookup")
int BPF_PROG(route_fib_lookup, u32 table, const struct flowi4 *flp,
	     const struct fib_nh_common *nhc, int err)
{
	struct nat_slot *slot = NULL;
	struct net_device *dev = NULL;
	struct nt_tuple t = {};

	t.saddr[0] = flp->saddr;
	t.daddr[0] = flp->daddr;
	t.proto = flp->__fl_common.flowic_proto;
	t.sport = bpf_ntohs(flp->uli.ports.sport);
	t.dport = bpf_ntohs(flp->uli.ports.dport);
	if (!route_lookup_wanted(&t, table, &slot))
		return 0;

	NT_EVENT(e);

	if (!e)
		return 0;
	nt_init(e, NT_POINT_ROUTE, NT_KIND_ROUTE_LOOKUP, 0);
	e->tuple = t;
	if (nhc) {
		dev = BPF_CORE_READ(nhc, nhc_dev);
		if (BPF_CORE_READ(nhc, nhc_gw_family) == 2 /* AF_INET */)
			e->u.route.gateway[0] = BPF_CORE_READ(nhc, nhc_gw.ipv4);
	}
	route_lookup_report(e, slot, dev, err, table);
	return 0;
}

/* IPv6's lookup reports no error: a lookup that found no route gives the
 * null entry, an unreachable route (through lo). */
SEC("tp_btf/fib6_table_lookup")
int BPF_PROG(route_fib6_lookup, const struct net *net, const struct fib6_result *res,
	     struct fib6_table *table, const struct flowi6 *flp)
{
	struct nat_slot *slot = NULL;
	struct net_device *dev = NULL;
	struct nt_tuple t = { .ipv6 = 1 };
	struct fib6_nh *nh;
	__u32 table_id;
	int err = 0;

	BPF_CORE_READ_INTO(&t.saddr, flp, saddr.in6_u.u6_addr32);
	BPF_CORE_READ_INTO(&t.daddr, flp, daddr.in6_u.u6_addr32);
	t.proto = BPF_CORE_READ(flp, __fl_common.flowic_proto);
	t.sport = bpf_ntohs(BPF_CORE_READ(flp, uli.ports.sport));
	t.dport = bpf_ntohs(BPF_CORE_READ(flp, uli.ports.dport));
	table_id = BPF_CORE_READ(table, tb6_id);
	if (!route_lookup_wanted(&t, table_id, &slot))
		return 0;

	NT_EVENT(e);

	if (!e)
		return 0;
	nt_init(e, NT_POINT_ROUTE, NT_KIND_ROUTE_LOOKUP, 0);
	e->tuple = t;
	nh = BPF_CORE_READ(res, nh);
	if (BPF_CORE_READ(res, fib6_type) == RTN_UNREACHABLE)
		err = -101; /* -ENETUNREACH, what the caller makes of it */
	else if (nh) {
		dev = BPF_CORE_READ(nh, nh_common.nhc_dev);
		BPF_CORE_READ_INTO(&e->u.route.gateway, nh, nh_common.nhc_gw.ipv6.in6_u.u6_addr32);
	}
	route_lookup_report(e, slot, dev, err, table_id);
	return 0;
}
