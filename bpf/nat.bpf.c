// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * nat: the tuple of a packet before and after each NAT hook.
 *
 * Three ways to bracket the translation, in the loader's order of
 * preference: fentry/fexit or kprobe/kretprobe on the NAT hook function
 * (nf_nat_ipv4_fn, or nf_nat_inet_fn where the former is inlined), or two
 * BPF netfilter programs linked just before and just after the NAT
 * priority of each hook. All share nat_enter/nat_exit.
 */
#include "common.h"

/* Events are built on the stack, so nt_event appears in no signature and
 * clang would leave it out of BTF; this typed null pointer keeps it there for
 * bpf2go to generate its Go twin. */
const struct nt_event *nt_event_btf_anchor __attribute__((unused));

/* kretprobe has no arguments: the entry leaves the skb and hook here. */
struct nat_call {
	__u64 skb;
	__u32 hook;
	__u32 netns;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct nat_call);
} nat_calls SEC(".maps");

static __always_inline void nat_enter(struct sk_buff *skb, __u32 hook, __u32 netns, bool direct)
{
	struct nat_slot *slot;
	struct nt_event e;

	if (hook >= NT_HOOKS)
		return;
	slot = bpf_map_lookup_elem(&nat_slots, &hook);
	if (!slot)
		return;
	slot->active = 0;
	if (!nt_netns_watched(netns))
		return;
	nt_init(&e, NT_POINT_NAT, NT_KIND_NAT, (__u64)skb);
	if (!nt_parse_skb(skb, false, &e, NULL, direct))
		return;
	slot->skb = (__u64)skb;
	slot->pre = e.tuple;
	slot->active = 1;
	slot->followed = nt_follow(e.skb, nt_ct_of(skb, direct), &e.tuple, NULL) == NT_REPORT;
}

static __always_inline void nat_exit(struct sk_buff *skb, __u32 hook, __u32 netns, bool direct)
{
	struct nat_slot *slot;
	struct nt_event e;
	bool followed = false;
	struct net_device *out;

	if (hook >= NT_HOOKS)
		return;
	slot = bpf_map_lookup_elem(&nat_slots, &hook);
	if (!slot)
		return;
	if (!nt_netns_watched(netns))
		return;
	nt_init(&e, NT_POINT_NAT, NT_KIND_NAT, (__u64)skb);
	e.hook = hook;
	e.netns = netns;
	if (!nt_parse_skb(skb, false, &e, NULL, direct))
		goto out;
	if (slot->active && slot->skb == (__u64)skb) {
		e.u.nat.pre = slot->pre;
		e.flags |= NT_F_PRE;
		followed = slot->followed;
	}
	/* A packet DNATed onto the filter's address is followed from here on. */
	if (!followed && nt_follow(e.skb, nt_ct_of(skb, direct), &e.tuple, NULL) != NT_REPORT)
		goto out;
	nt_fill_ct(skb, &e);
	if (filter_len && (e.flags & NT_F_CT) && !(e.ct.status & IPS_CONFIRMED))
		nt_track_ct_tuples(e.ct.id);
	out = nt_dst_dev(skb);
	if (out) {
		e.u.nat.out_ifindex = BPF_CORE_READ(out, ifindex);
		bpf_probe_read_kernel_str(e.u.nat.out_ifname, sizeof(e.u.nat.out_ifname), out->name);
	}
	nt_fill_dev(BPF_CORE_READ(skb, dev), &e);
	nt_submit_skb(&e, skb, false, direct);
out:
	slot->active = 0;
}

/* The netfilter fallback. Both programs only observe: always NF_ACCEPT. */
SEC("netfilter")
int nat_before(struct bpf_nf_ctx *ctx)
{
	const struct nf_hook_state *state = ctx->state;

	nat_enter(ctx->skb, state->hook, state->net->ns.inum, true);
	return NF_ACCEPT;
}

SEC("netfilter")
int nat_after(struct bpf_nf_ctx *ctx)
{
	const struct nf_hook_state *state = ctx->state;

	nat_exit(ctx->skb, state->hook, state->net->ns.inum, true);
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
	nat_exit(skb, state->hook, state->net->ns.inum, true);
	return 0;
}

SEC("kprobe/nf_nat_inet_fn")
int BPF_KPROBE(nat_kprobe, void *priv, struct sk_buff *skb, const struct nf_hook_state *state)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct nat_call call = {
		.skb = (__u64)skb,
		.hook = BPF_CORE_READ(state, hook),
		.netns = BPF_CORE_READ(state, net, ns.inum),
	};

	nat_enter(skb, call.hook, call.netns, false);
	bpf_map_update_elem(&nat_calls, &id, &call, BPF_ANY);
	return 0;
}

SEC("kretprobe/nf_nat_inet_fn")
int BPF_KRETPROBE(nat_kretprobe)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct nat_call *call = bpf_map_lookup_elem(&nat_calls, &id);

	if (!call)
		return 0;
	nat_exit((struct sk_buff *)call->skb, call->hook, call->netns, false);
	bpf_map_delete_elem(&nat_calls, &id);
	return 0;
}
