/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The syn point's reporting and its tracepoint method, shared by syn.bpf.c
 * (fentry, kprobe on tcp_conn_request) and the consume site (sites.bpf.c).
 */
#ifndef NETTRACE_SYN_H
#define NETTRACE_SYN_H

#include "common.h"

/* Kernel text range of tcp_rcv_state_process, set by the loader. */
volatile const __u64 listen_fn_start = 0;
volatile const __u64 listen_fn_end = 0;

/* A SYN's answer is the SYN-ACK that acknowledges its sequence number,
 * sent on this CPU before the SYN is consumed, and taken by that SYN alone.
 * The time between the two is the CPU's to spend (a large ruleset at
 * OUTPUT, a virtual CPU the host has descheduled: tens of milliseconds), so
 * it is no test of the answer. The bound only keeps out the SYN-ACK of an
 * earlier attempt of the same connection, which the listener sends again
 * at its retransmission timer (TCP_TIMEOUT_INIT, 1 s, and longer after),
 * never between one of its SYNs and that SYN's consume. */
#define SYNACK_WINDOW_NS 1000000000ULL

struct syn_queues {
	__u32 syn_qlen;
	__u32 accept_qlen;
	__u32 accept_max;
};

static __always_inline void syn_read_queues(struct sock *sk, struct syn_queues *q)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;

	q->syn_qlen = BPF_CORE_READ(icsk, icsk_accept_queue.qlen.counter);
	q->accept_qlen = BPF_CORE_READ(sk, sk_ack_backlog);
	q->accept_max = BPF_CORE_READ(sk, sk_max_ack_backlog);
}

/* A device in the listener's namespace. TCP clears skb->dev before the
 * socket handles the packet (it shares the space with the socket's
 * timestamp); the input route's device (loopback, for local delivery) is
 * still in that namespace. */
static __always_inline struct net_device *syn_dev(struct sk_buff *skb)
{
	struct net_device *dev = BPF_CORE_READ(skb, dev);

	return dev ? dev : nt_dst_dev(skb);
}

/* The outcome of a SYN the listener left no answer to, by the kernel's
 * order of tests in tcp_conn_request: a full SYN queue drops the SYN only
 * when syncookies are off (else a cookie answers it, unless the accept
 * queue is full too); then a full accept queue. Kernels differ on when the
 * SYN queue is full (6.1: at the backlog, 6.18: past it): at the backlog
 * exactly, a full accept queue is the likelier cause. */
static __always_inline __u8 syn_drop_cause(struct sock *sk, const struct syn_queues *q)
{
	__u8 syncookies = BPF_CORE_READ(sk, __sk_common.skc_net.net, ipv4.sysctl_tcp_syncookies);

	if (q->syn_qlen > q->accept_max && !syncookies)
		return NT_SYN_DROP_SYN_QUEUE;
	if (q->accept_qlen > q->accept_max)
		return NT_SYN_DROP_ACCEPT_QUEUE;
	if (q->syn_qlen >= q->accept_max && !syncookies)
		return NT_SYN_DROP_SYN_QUEUE;
	return NT_SYN_DROP_OTHER;
}

/* Reports a SYN at listener sk (NULL: unknown, laddr from the SYN). The
 * skb is read with probe reads: it comes from a map or a call stack as a
 * plain address in the kprobe and fexit paths. */
static __always_inline void syn_report(struct sock *sk, struct sk_buff *skb, __u8 outcome,
				       const struct syn_queues *q)
{
	struct net_device *dev = syn_dev(skb);
	NT_EVENT(e);
	bool failure;

	if (!e)
		return;

	nt_init_decision(e);
	if (!nt_decide_skb(skb, dev, false, e, NULL, false, false))
		return;
	nt_init_rest(e, NT_POINT_SYN, NT_KIND_SYN, (__u64)skb);
	nt_fill_skb(e, skb, dev);
	/* The route's device names the namespace, not the device the SYN came
	 * in by: leave the device out rather than name the wrong one. */
	if (!BPF_CORE_READ(skb, dev)) {
		e->ifindex = 0;
		e->ifname[0] = 0;
	}
	__builtin_memcpy(e->u.syn.laddr, e->tuple.daddr, sizeof(e->u.syn.laddr));
	e->u.syn.lport = e->tuple.dport;
	if (sk) {
		/* An IPv6 listener keeps the address the SYN was sent to. */
		if (!e->tuple.ipv6)
			e->u.syn.laddr[0] = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		e->u.syn.lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	}
	e->u.syn.syn_qlen = q->syn_qlen;
	e->u.syn.accept_qlen = q->accept_qlen;
	e->u.syn.accept_max = q->accept_max;
	e->u.syn.outcome = outcome;
	/* Judged on the outcome read back from the event, which the verifier
	 * does not track: judged on outcome itself, a constant on each of the
	 * many ways here (each SYN-ACK slot, each drop cause), the ways stayed
	 * apart through the submission, and the consume_skb program passed the
	 * verifier's million instructions under a filter of two ports. */
	failure = *(volatile __u8 *)&e->u.syn.outcome != NT_SYN_QUEUED;
	nt_submit_skb_as(e, skb, false, false, failure);
}

/* Takes the SYN-ACK this CPU sent for a SYN of sequence number seq: its
 * outcome (NT_SYN_QUEUED or NT_SYN_COOKIE), or 0 when it sent none. */
static __always_inline __u8 syn_take_answer(const struct nt_tuple *syn, __u32 seq)
{
	__u32 key = 0;
	struct synack_ring *ring = bpf_map_lookup_elem(&synack_slots, &key);
	__u64 now = bpf_ktime_get_ns();

	if (!ring)
		return 0;
	for (int i = 0; i < NT_SYNACK_SLOTS; i++) {
		struct synack_slot *s = &ring->slots[i];

		if (s->ts && now - s->ts < SYNACK_WINDOW_NS && s->ack == seq + 1 &&
		    nt_same_addr(s->tuple.saddr, syn->daddr) && nt_same_addr(s->tuple.daddr, syn->saddr) &&
		    s->tuple.sport == syn->dport && s->tuple.dport == syn->sport) {
			s->ts = 0;
			return s->req ? NT_SYN_QUEUED : NT_SYN_COOKIE;
		}
	}
	return 0;
}

/* A SYN-ACK is sent in the softirq that then consumes its SYN, within
 * microseconds (a millisecond under TCG): a SYN consumed this long after
 * the links were noted cannot have had its SYN-ACK sent before them. */
#define SYN_NOTED_GUARD_NS 50000000ULL

/* Whether every SYN-ACK that could answer a SYN consumed now in a
 * namespace was noted: the nat point's programs are linked there
 * (synack_noted), since before the SYN-ACK could have been sent. */
static __always_inline bool syn_answers_noted(__u32 netns)
{
	__u64 *since = bpf_map_lookup_elem(&synack_noted, &netns);

	return since && bpf_ktime_get_ns() >= *since + SYN_NOTED_GUARD_NS;
}

/* The tracepoint method, at consume_skb. Runs before the drop point's
 * handler in the consume site, which forgets the packet's identity. */
static __always_inline void syn_at_consume(struct sk_buff *skb, void *location)
{
	struct listener_key lk = {};
	struct syn_queues q = {};
	struct sock *listener = NULL;
	struct nt_tuple t = {};
	__u32 seq, ack;
	__u64 *found;
	__u8 outcome;

	/* Every packet the host consumes passes here: the location test,
	 * constants only, comes first. */
	if ((__u64)location < listen_fn_start || (__u64)location >= listen_fn_end)
		return;
	if (!nt_read_l3(skb->protocol, skb->head, skb->network_header, &t) || t.proto != IPPROTO_TCP ||
	    (t.tcp_flags & (TCP_FLAG_SYN | 0x10)) != TCP_FLAG_SYN || !nt_tcp_seq_ack(skb, true, &seq, &ack))
		return;
	lk.netns = nt_dev_netns(syn_dev(skb), false);
	lk.port = t.dport;
	found = bpf_map_lookup_elem(&listeners, &lk);
	if (found) {
		listener = (struct sock *)*found;
		/* The socket may have been closed and its memory reused. */
		if (BPF_CORE_READ(listener, __sk_common.skc_state) != TCP_LISTEN ||
		    BPF_CORE_READ(listener, __sk_common.skc_num) != t.dport)
			listener = NULL;
	}
	if (listener)
		syn_read_queues(listener, &q);
	outcome = syn_take_answer(&t, seq);
	if (!outcome && !syn_answers_noted(lk.netns))
		outcome = NT_SYN_UNOBSERVED; /* its SYN-ACK, if it had one, could not be seen */
	if (!outcome)
		outcome = listener ? syn_drop_cause(listener, &q) : NT_SYN_DROP_UNANSWERED;
	syn_report(listener, skb, outcome, &q);
}

#endif
