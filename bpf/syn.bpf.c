// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * syn: a SYN at a listening socket, its queues and what became of it.
 *
 * tcp_conn_request returns 0 whether it queued the SYN or dropped it, so
 * the outcome is read from the listener: a request socket added to the SYN
 * queue means queued; otherwise the queue state at entry names the cause.
 * Kernels without kprobes or fentry get this point from the Go side
 * (sock_diag and TcpExt counters), not from here.
 */
#include "common.h"

struct syn_call {
	__u64 sk;
	__u64 skb;
	__u32 syn_qlen;
	__u32 accept_qlen;
	__u32 accept_max;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct syn_call);
} syn_calls SEC(".maps");

static __always_inline __u32 syn_queue_len(struct sock *sk)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;

	return BPF_CORE_READ(icsk, icsk_accept_queue.qlen.counter);
}

static __always_inline void syn_enter(struct sock *sk, struct sk_buff *skb)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct syn_call call = {
		.sk = (__u64)sk,
		.skb = (__u64)skb,
		.syn_qlen = syn_queue_len(sk),
		.accept_qlen = BPF_CORE_READ(sk, sk_ack_backlog),
		.accept_max = BPF_CORE_READ(sk, sk_max_ack_backlog),
	};

	bpf_map_update_elem(&syn_calls, &id, &call, BPF_ANY);
}

static __always_inline void syn_exit(bool direct)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct syn_call *call = bpf_map_lookup_elem(&syn_calls, &id);
	struct sock *sk;
	struct sk_buff *skb;
	struct nt_event e;

	if (!call)
		return;
	sk = (struct sock *)call->sk;
	skb = (struct sk_buff *)call->skb;
	nt_init(&e, NT_POINT_SYN, NT_KIND_SYN, call->skb);
	e.netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	/* The skb comes from the map as a plain address: probe reads only. */
	if (!nt_netns_watched(e.netns) || !nt_parse_skb(skb, false, &e, NULL, false))
		goto out;
	if (nt_follow(e.skb, nt_ct_of(skb, false), &e.tuple, NULL) == NT_SKIP)
		goto out;
	nt_fill_ct(skb, &e);
	nt_fill_dev(BPF_CORE_READ(skb, dev), &e);
	e.u.syn.laddr = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
	e.u.syn.lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	e.u.syn.syn_qlen = call->syn_qlen;
	e.u.syn.accept_qlen = call->accept_qlen;
	e.u.syn.accept_max = call->accept_max;
	if (syn_queue_len(sk) > call->syn_qlen)
		e.u.syn.outcome = NT_SYN_QUEUED;
	else if (call->accept_qlen > call->accept_max)
		e.u.syn.outcome = NT_SYN_DROP_ACCEPT_QUEUE;
	else if (call->syn_qlen >= call->accept_max)
		e.u.syn.outcome = NT_SYN_DROP_SYN_QUEUE;
	else
		e.u.syn.outcome = NT_SYN_DROP_OTHER;
	nt_submit_skb(&e, skb, false, false);
out:
	bpf_map_delete_elem(&syn_calls, &id);
}

SEC("fentry/tcp_conn_request")
int BPF_PROG(syn_fentry, void *rsk_ops, void *af_ops, struct sock *sk, struct sk_buff *skb)
{
	syn_enter(sk, skb);
	return 0;
}

SEC("fexit/tcp_conn_request")
int BPF_PROG(syn_fexit, void *rsk_ops, void *af_ops, struct sock *sk, struct sk_buff *skb, int ret)
{
	syn_exit(false);
	return 0;
}

SEC("kprobe/tcp_conn_request")
int BPF_KPROBE(syn_kprobe, void *rsk_ops, void *af_ops, struct sock *sk, struct sk_buff *skb)
{
	syn_enter(sk, skb);
	return 0;
}

SEC("kretprobe/tcp_conn_request")
int BPF_KRETPROBE(syn_kretprobe)
{
	syn_exit(false);
	return 0;
}
