// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * nat: the tuple of a packet before and after each NAT hook.
 *
 * Three ways to observe the translation, in the loader's order of
 * preference: fentry/fexit or kprobe/kretprobe on the NAT hook function
 * (nf_nat_ipv4_fn, or nf_nat_inet_fn where the former is inlined), or BPF
 * netfilter programs. All share nat_enter/nat_exit.
 *
 * The netfilter method links one program per hook, just after its NAT,
 * and takes the tuple before the NAT from the packet's conntrack entry
 * (nat_pre_from_ct): a program before the NAT would double the runs every
 * packet pays in every namespace it crosses. Only OUTPUT also gets the
 * program before its NAT: the re-route that a DNAT in OUTPUT triggers runs
 * inside the NAT, and the route point's tracepoint method attributes its
 * FIB lookup by that window (nat_slots); SYN-ACKs are noted there too.
 * A namespace where conntrack does not run gets nat_watch in their place
 * (see there).
 */
#include "common.h"

/* Events are built on the stack, so nt_event appears in no signature and
 * clang would leave it out of BTF; this typed null pointer keeps it there for
 * bpf2go to generate its Go twin. The enums' values are folded into the
 * code, so they too need an anchor for package probe's tests to check
 * pkg/event's points and kinds against them. */
const struct nt_event *nt_event_btf_anchor __attribute__((unused));
const enum nt_point *nt_point_btf_anchor __attribute__((unused));
const enum nt_kind *nt_kind_btf_anchor __attribute__((unused));
const enum nt_syn_outcome *nt_syn_outcome_btf_anchor __attribute__((unused));

/* kretprobe has no arguments: the entry leaves the skb, hook and namespace
 * on this CPU's call stack. */
NT_CALL_STACK(nat_calls);

/* Notes a SYN-ACK leaving this namespace for the syn point (synack_slots),
 * and the listener that sent it (listeners). */
static __always_inline void nat_note_synack(struct sk_buff *skb, const struct nt_tuple *t, __u32 netns,
					    bool direct)
{
	struct listener_key lk = { .netns = netns, .port = t->sport };
	struct synack_ring *ring;
	struct synack_slot *slot;
	struct sock *sk;
	__u64 listener;
	__u32 key = 0, seq, ack;

	if (t->proto != IPPROTO_TCP || (t->tcp_flags & TCP_FLAGS_SYNACK) != TCP_FLAGS_SYNACK)
		return;
	if (!nt_tcp_seq_ack(skb, direct, &seq, &ack))
		return;
	ring = bpf_map_lookup_elem(&synack_slots, &key);
	if (!ring)
		return;
	/* Masked for the verifier, which needs the index bounded. */
	slot = &ring->slots[ring->next++ & (NT_SYNACK_SLOTS - 1)];
	slot->ts = bpf_ktime_get_ns();
	slot->tuple = *t;
	slot->ack = ack;
	slot->req = 0;
	/* A SYN-ACK for a queued request is owned by its request socket; a
	 * syncookie SYN-ACK by no socket. */
	sk = BPF_CORE_READ(skb, sk);
	if (!sk || BPF_CORE_READ(sk, __sk_common.skc_state) != TCP_NEW_SYN_RECV)
		return;
	slot->req = (__u64)sk;
	listener = (__u64)BPF_CORE_READ((struct request_sock *)sk, __req_common.skc_listener);
	if (listener)
		bpf_map_update_elem(&listeners, &lk, &listener, BPF_ANY);
}

static __always_inline void nat_enter(struct sk_buff *skb, __u32 hook, __u32 netns, bool direct)
{
	struct nat_slot *slot;
	NT_EVENT(e);

	if (!e)
		return;

	if (hook >= NT_HOOKS)
		return;
	slot = bpf_map_lookup_elem(&nat_slots, &hook);
	if (!slot)
		return;
	slot->active = 0;
	if (!nt_netns_watched(netns))
		return;
	/* The event only carries the parsed packet to the slot: it is never
	 * reported here. */
	nt_init_decision(e);
	if (!nt_parse_skb(skb, false, e, NULL, direct))
		return;
	if (hook == NF_INET_LOCAL_OUT)
		nat_note_synack(skb, &e->tuple, netns, direct);
	slot->skb = (__u64)skb;
	slot->netns = netns;
	slot->pre = e->tuple;
	slot->active = 1;
	slot->followed = !nt_unremarkable(nt_ct_of(skb, direct), &e->tuple, nt_inner(e)) &&
			 nt_follow((__u64)skb, nt_ct_of(skb, direct), &e->tuple, NULL) == NT_REPORT;
}

#define NF_INET_PRE_ROUTING 0

/* The tuple a packet had before this hook's NAT, where no program saw it
 * before: conntrack keeps the tuple the packet entered this namespace with
 * (tuplehash of its direction). DNAT hooks (PREROUTING, OUTPUT) rewrite the
 * destination and leave the source as it came in; SNAT hooks (INPUT,
 * POSTROUTING) rewrite the source after the destination is final. False
 * when the packet does not carry its entry's tuple (an ICMP error carries
 * the entry of the connection it quotes): its tuple before is unknown. */
static __always_inline bool nat_pre_from_ct(struct sk_buff *skb, __u32 hook, const struct nt_tuple *now,
					    struct nt_tuple *pre, bool direct)
{
	unsigned long nfct = NT_RD(direct, skb, _nfct);
	struct nf_conn *ct = (struct nf_conn *)(nfct & ~7UL);
	struct nt_tuple in;
	bool dst_hook = hook == NF_INET_PRE_ROUTING || hook == NF_INET_LOCAL_OUT;

	*pre = *now;
	/* Without an entry, or with one NAT never changed, nothing moved. */
	if (!ct || !(nt_ct_status(ct) & IPS_NAT_MASK))
		return true;
	nt_read_ct_tuple(&ct->tuplehash[(nfct & 7) >= IP_CT_IS_REPLY].tuple, &in);
	if (in.proto != now->proto)
		return false;
	if (dst_hook) {
		if (!nt_same_addr(in.saddr, now->saddr) || in.sport != now->sport)
			return false;
		__builtin_memcpy(pre->daddr, in.daddr, sizeof(pre->daddr));
		pre->dport = in.dport;
	} else {
		if (nt_same_addr(in.saddr, now->saddr) && in.sport == now->sport)
			return true;
		__builtin_memcpy(pre->saddr, in.saddr, sizeof(pre->saddr));
		pre->sport = in.sport;
	}
	return true;
}

/* Whether conntrack's hooks are registered for family pf in net: each
 * registration takes a reference on the family's defragmentation, which
 * conntrack needs, and little else does. A kernel that keeps the count
 * elsewhere than struct netns_nf says nothing here, and nothing is judged
 * INVALID. net is the netfilter program's own (trusted: read directly). */
static __always_inline bool nat_conntrack_tracking(const struct net *net, __u8 pf)
{
	if (!bpf_core_field_exists(net->nf.defrag_ipv4_users))
		return false;
	if (pf == NFPROTO_IPV6)
		return net->nf.defrag_ipv6_users > 0;
	return net->nf.defrag_ipv4_users > 0;
}

/* Conntrack ran on a packet at this hook and left it without an entry: it
 * judged the packet INVALID (out of its TCP window, a flag combination no
 * state allows, a checksum it checks), and NAT, which translates by the
 * entry, leaves the packet as it came. Conntrack takes packets in at
 * PREROUTING and OUTPUT, before NAT; an untracked packet (raw NOTRACK)
 * carries IP_CT_UNTRACKED rather than nothing. net is the namespace's when
 * the method runs at every hook (netfilter), where whether conntrack runs
 * there for the family pf must be asked; NULL when it runs in NAT's hook
 * function, which runs only where conntrack does. */
static __always_inline bool nat_judged_invalid(struct sk_buff *skb, __u32 hook, const struct net *net, __u8 pf,
					       bool direct)
{
	if (hook != NF_INET_PRE_ROUTING && hook != NF_INET_LOCAL_OUT)
		return false;
	if (NT_RD(direct, skb, _nfct) != 0)
		return false;
	return !net || nat_conntrack_tracking(net, pf);
}

/* Clears the rest of an event decided on (nt_init_decision, then the
 * parse) and says what it is: the hook, and the tuple before the NAT when
 * known. */
static __always_inline void nat_init_report(struct nt_event *e, struct sk_buff *skb, __u32 hook, __u32 netns,
					    const struct nt_tuple *pre)
{
	nt_init_rest(e, NT_POINT_NAT, NT_KIND_NAT, (__u64)skb);
	e->hook = hook;
	e->netns = netns;
	if (pre) {
		e->u.nat.pre = *pre;
		e->flags |= NT_F_PRE;
	}
}

/* An INVALID packet is evidence whatever its flags: it is reported even
 * where a plain segment without an entry would not be. */
static __always_inline void nat_report_invalid(struct sk_buff *skb, struct nt_event *e, __u32 hook, __u32 netns,
					       bool direct)
{
	if (nt_follow((__u64)skb, 0, &e->tuple, NULL) != NT_REPORT)
		return;
	nat_init_report(e, skb, hook, netns, NULL);
	e->flags |= NT_F_CT_INVALID;
	nt_fill_dev(BPF_CORE_READ(skb, dev), e);
	nt_submit_skb(e, skb, false, direct);
}

/* route_final says the packet's route is the one it leaves with: the
 * netfilter method runs after the whole NAT hook, but fexit and kretprobe
 * return with NAT's function, before OUTPUT's hook re-routes a translated
 * packet (ip_route_me_harder, which the route point reports): there the
 * route attached is the one the packet is leaving. */
static __always_inline void nat_exit(struct sk_buff *skb, __u32 hook, __u32 netns, bool direct, bool route_final,
				     const struct net *net, __u8 pf)
{
	struct nat_slot *slot;
	NT_EVENT(e);
	bool followed = false, has_pre = false;
	struct nt_tuple pre;
	struct net_device *out;
	__u64 ct;
	int verdict;

	if (!e)
		return;

	if (hook >= NT_HOOKS)
		return;
	slot = bpf_map_lookup_elem(&nat_slots, &hook);
	if (!slot)
		return;
	if (!nt_netns_watched(netns))
		return;
	/* NAT translates only what conntrack tracks: a packet without an entry
	 * passes a hook that is not NAT's (the netfilter method runs at every
	 * hook of a watched namespace, NAT or not), unless conntrack judged it
	 * INVALID. Decided before the event is set up: in a namespace without
	 * conntrack (a pod's without rules), every run ends here. */
	ct = nt_ct_of(skb, direct);
	if (!ct && !nat_judged_invalid(skb, hook, net, pf, direct))
		goto out;
	nt_init_decision(e);
	if (!nt_parse_skb(skb, false, e, NULL, direct))
		goto out;
	if (!ct) {
		nat_report_invalid(skb, e, hook, netns, direct);
		goto out;
	}
	if (slot->active && slot->skb == (__u64)skb) {
		pre = slot->pre;
		has_pre = true;
		followed = slot->followed;
	}
	if (!followed) {
		if (nt_unremarkable(ct, &e->tuple, nt_inner(e)))
			goto out;
		/* A packet DNATed onto the filter's address is followed from
		 * here on; one DNATed away from it (a ClusterIP) by its tuple
		 * before. */
		verdict = nt_follow((__u64)skb, ct, &e->tuple, NULL);
		if (verdict == NT_QUIET)
			goto out;
		if (!has_pre && nat_pre_from_ct(skb, hook, &e->tuple, &pre, direct)) {
			has_pre = true;
			if (verdict == NT_SKIP && !nt_same_tuple(&pre, &e->tuple))
				verdict = nt_follow((__u64)skb, ct, &pre, NULL);
		}
		if (verdict != NT_REPORT)
			goto out;
	}
	nat_init_report(e, skb, hook, netns, has_pre ? &pre : NULL);
	nt_fill_ct(skb, e);
	if (filter_len && (e->flags & NT_F_CT) && !(e->ct.status & IPS_CONFIRMED))
		nt_track_ct_tuples(e->ct.id);
	out = route_final ? nt_dst_dev(skb) : NULL;
	if (out) {
		e->u.nat.out_ifindex = BPF_CORE_READ(out, ifindex);
		bpf_probe_read_kernel_str(e->u.nat.out_ifname, sizeof(e->u.nat.out_ifname), out->name);
	}
	nt_fill_dev(BPF_CORE_READ(skb, dev), e);
	nt_submit_skb(e, skb, false, direct);
out:
	slot->active = 0;
}

/* The netfilter method. Its programs only observe: always NF_ACCEPT. */
SEC("netfilter")
int nat_before(struct bpf_nf_ctx *ctx)
{
	const struct nf_hook_state *state = ctx->state;

	nat_enter(ctx->skb, state->hook, state->net->ns.inum, true);
	return NF_ACCEPT;
}

/* A namespace where conntrack does not run (a pod's, without rules) has no
 * NAT to observe, yet nat_after linked there runs at four hooks of every
 * packet. So nat_after tells user space, by conntrack_changed, of a
 * namespace where it finds conntrack off for both families, and user space
 * links nat_watch there instead, at the two hooks a packet enters a
 * namespace's IP stack by (PREROUTING, OUTPUT): one run a packet, which
 * notes the SYN-ACKs leaving for the syn point and tells user space when
 * conntrack starts (a NAT rule, a conntrack match, tc's act_ct). User space
 * then links the NAT programs again, before it unlinks nat_watch. Until
 * they are linked, each packet conntrack tracks in that namespace is
 * counted lost to the nat point: its translations went unseen, so the
 * flows around it are incomplete, never explained from what they lack. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);  /* the namespace's inode */
	__type(value, __u8); /* whether conntrack runs there now */
} conntrack_changed SEC(".maps");

/* Wakes user space when a change is noted, so that it need not poll the
 * map: what a record says is in conntrack_changed. A record that finds
 * the ring full is not needed: the ones filling it wake the reader, which
 * reads the map after them. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} conntrack_wakeup SEC(".maps");

static __always_inline void nat_conntrack_changed(__u32 netns, __u8 running)
{
	/* The first change stands until user space takes it: a later one
	 * (conntrack started again) is retried by the next packet. */
	if (bpf_map_update_elem(&conntrack_changed, &netns, &running, BPF_NOEXIST) == 0)
		bpf_ringbuf_output(&conntrack_wakeup, &netns, sizeof(netns), BPF_RB_FORCE_WAKEUP);
}

/* Whether conntrack is known not to run in net, for either family: a
 * kernel that keeps its count elsewhere than struct netns_nf cannot say. */
static __always_inline bool nat_conntrack_off(const struct net *net)
{
	return bpf_core_field_exists(net->nf.defrag_ipv4_users) && !nat_conntrack_tracking(net, NFPROTO_IPV4) &&
	       !nat_conntrack_tracking(net, NFPROTO_IPV6);
}

SEC("netfilter")
int nat_after(struct bpf_nf_ctx *ctx)
{
	/* Both read first: clang would otherwise keep &ctx->skb in a register,
	 * and the verifier refuses a load through a ctx pointer moved off its
	 * start. */
	const struct nf_hook_state *state = ctx->state;
	struct sk_buff *skb = ctx->skb;
	__u32 netns = state->net->ns.inum;

	/* No conntrack entry, and none to come: the packet is one of a
	 * namespace where nat_watch would do. */
	if (!nt_ct_of(skb, true) && nat_conntrack_off(state->net))
		nat_conntrack_changed(netns, 0);
	nat_exit(skb, state->hook, netns, true, true, state->net, state->pf);
	return NF_ACCEPT;
}

static __always_inline void nat_watch_synack(struct sk_buff *skb, __u32 netns)
{
	NT_EVENT(e);

	if (!e || !nt_netns_watched(netns))
		return;
	/* The event only carries the parsed packet: it is never reported. */
	nt_init_decision(e);
	if (nt_parse_skb(skb, false, e, NULL, true))
		nat_note_synack(skb, &e->tuple, netns, true);
}

SEC("netfilter")
int nat_watch(struct bpf_nf_ctx *ctx)
{
	const struct nf_hook_state *state = ctx->state;
	__u32 netns = state->net->ns.inum;

	if (!bpf_core_field_exists(state->net->nf.defrag_ipv4_users) || nat_conntrack_tracking(state->net, state->pf)) {
		nat_conntrack_changed(netns, 1);
		nt_count_lost(NT_POINT_NAT);
	}
	/* Most packets a pod sends are not SYN-ACKs: settled before the event
	 * slot, the namespace lookup and the parse. */
	if (state->hook == NF_INET_LOCAL_OUT && nt_sent_maybe_synack(ctx->skb, true))
		nat_watch_synack(ctx->skb, netns);
	return NF_ACCEPT;
}

/* The attach target is set by the loader to the candidate this kernel has;
 * all candidates share the netfilter hook signature. */
SEC("fentry/nf_nat_inet_fn")
int BPF_PROG(nat_fentry, void *priv, struct sk_buff *skb, const struct nf_hook_state *state)
{
	nat_enter(skb, state->hook, state->net->ns.inum, true);
	return 0;
}

SEC("fexit/nf_nat_inet_fn")
int BPF_PROG(nat_fexit, void *priv, struct sk_buff *skb, const struct nf_hook_state *state,
	     unsigned int verdict)
{
	nat_exit(skb, state->hook, state->net->ns.inum, true, state->hook != NF_INET_LOCAL_OUT, NULL, 0);
	return 0;
}

SEC("kprobe/nf_nat_inet_fn")
int BPF_KPROBE(nat_kprobe, void *priv, struct sk_buff *skb, const struct nf_hook_state *state)
{
	struct nt_call call = {
		.obj = (__u64)skb,
		.v = { BPF_CORE_READ(state, hook), BPF_CORE_READ(state, net, ns.inum) },
	};

	nat_enter(skb, call.v[0], call.v[1], false);
	nt_call_push(&nat_calls, &call);
	return 0;
}

SEC("kretprobe/nf_nat_inet_fn")
int BPF_KRETPROBE(nat_kretprobe)
{
	struct nt_call call;

	if (nt_call_pop(&nat_calls, &call))
		nat_exit((struct sk_buff *)call.obj, call.v[0], call.v[1], false, call.v[0] != NF_INET_LOCAL_OUT,
			 NULL, 0);
	return 0;
}
