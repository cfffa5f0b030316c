// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * syn: a SYN at a listening socket, its queues and what became of it.
 *
 * tcp_conn_request returns 0 whether it queued the SYN or dropped it: a
 * request hashed into the SYN queue during the call
 * (inet_csk_reqsk_queue_hash_add) means queued, a syncookie computed
 * (__cookie_v4_init_sequence, __cookie_v6_init_sequence) means answered by
 * a cookie; otherwise the listener's queues name the cause (at entry, or
 * at exit when the accept queue filled during the call).
 *
 * Kernels without kprobes or fentry: a SYN handed to a listener is
 * consumed in tcp_rcv_state_process whatever became of it (a full accept
 * queue frees nothing), but a queued SYN was answered first, on the same
 * CPU, by a SYN-ACK the nat point's OUTPUT program notes in synack_slots.
 * A SYN consumed there without its SYN-ACK was dropped by the listener; the
 * listener's queues come from the socket that sent the earlier SYN-ACKs
 * (syn.h, run in the consume site of sites.bpf.c).
 */
#include "syn.h"

/* The calls to tcp_conn_request in progress on this CPU, innermost last,
 * with the listener's queues at entry and whether a request was queued.
 * Not keyed by skb: the request is queued in a nested call
 * (inet_csk_reqsk_queue_hash_add) that knows the listener and the request
 * but not the SYN. Queued-or-not cannot be read from the queue lengths
 * either: another CPU completes or adds requests meanwhile. A softirq that
 * interrupts a call on this CPU finishes before it (see nt_call_push). */
NT_CALL_STACK(syn_stack);

#define SYN_ANSWER 3 /* nt_call.v index: NT_SYN_QUEUED or NT_SYN_COOKIE, once answered */

static __always_inline void syn_begin(struct sock *sk, struct sk_buff *skb)
{
	struct nt_call call = { .obj = (__u64)skb, .aux = (__u64)sk };
	struct syn_queues q;

	syn_read_queues(sk, &q);
	call.v[0] = q.syn_qlen;
	call.v[1] = q.accept_qlen;
	call.v[2] = q.accept_max;
	nt_call_push(&syn_stack, &call);
}

/* The innermost call answered its SYN: a request queued, or a cookie. */
static __always_inline void syn_answered(__u8 outcome)
{
	__u32 key = 0;
	struct nt_call_stack *s = bpf_map_lookup_elem(&syn_stack, &key);
	__u32 d;

	if (!s || s->depth == 0)
		return;
	d = s->depth - 1;
	if (d < NT_CALL_DEPTH)
		s->calls[d & (NT_CALL_DEPTH - 1)].v[SYN_ANSWER] = outcome;
}

/* The cause of a SYN the call left unanswered, from the queues at entry.
 * When they name none, the accept queue may have filled during the call,
 * before the listener tested it: another CPU completed handshakes of
 * requests already in the SYN queue (the TCG guest, whose vCPUs take turns
 * on one host thread, stretches a call across many of them). The queues at
 * exit then name the cause, and the event carries them. */
static __always_inline __u8 syn_unanswered_cause(struct sock *sk, struct syn_queues *q)
{
	__u8 cause = syn_drop_cause(sk, q);
	struct syn_queues at_exit;

	if (cause != NT_SYN_DROP_OTHER)
		return cause;
	syn_read_queues(sk, &at_exit);
	if (at_exit.accept_qlen <= at_exit.accept_max)
		return cause;
	*q = at_exit;
	return NT_SYN_DROP_ACCEPT_QUEUE;
}

static __always_inline void syn_end(void)
{
	struct sock *listener;
	struct nt_call call;
	struct syn_queues q;

	if (!nt_call_pop(&syn_stack, &call))
		return;
	listener = (struct sock *)call.aux;
	q.syn_qlen = call.v[0];
	q.accept_qlen = call.v[1];
	q.accept_max = call.v[2];
	syn_report(listener, (struct sk_buff *)call.obj,
		   call.v[SYN_ANSWER] ? call.v[SYN_ANSWER] : syn_unanswered_cause(listener, &q), &q);
}

SEC("fentry/tcp_conn_request")
int BPF_PROG(syn_fentry, void *rsk_ops, void *af_ops, struct sock *sk, struct sk_buff *skb)
{
	syn_begin(sk, skb);
	return 0;
}

SEC("fentry/inet_csk_reqsk_queue_hash_add")
int BPF_PROG(syn_fentry_queued)
{
	syn_answered(NT_SYN_QUEUED);
	return 0;
}

SEC("fentry/__cookie_v4_init_sequence")
int BPF_PROG(syn_fentry_cookie)
{
	syn_answered(NT_SYN_COOKIE);
	return 0;
}

SEC("fentry/__cookie_v6_init_sequence")
int BPF_PROG(syn_fentry_cookie6)
{
	syn_answered(NT_SYN_COOKIE);
	return 0;
}

SEC("fexit/tcp_conn_request")
int BPF_PROG(syn_fexit)
{
	syn_end();
	return 0;
}

SEC("kprobe/tcp_conn_request")
int BPF_KPROBE(syn_kprobe, void *rsk_ops, void *af_ops, struct sock *sk, struct sk_buff *skb)
{
	syn_begin(sk, skb);
	return 0;
}

SEC("kprobe/inet_csk_reqsk_queue_hash_add")
int BPF_KPROBE(syn_kprobe_queued)
{
	syn_answered(NT_SYN_QUEUED);
	return 0;
}

SEC("kprobe/__cookie_v4_init_sequence")
int BPF_KPROBE(syn_kprobe_cookie)
{
	syn_answered(NT_SYN_COOKIE);
	return 0;
}

SEC("kprobe/__cookie_v6_init_sequence")
int BPF_KPROBE(syn_kprobe_cookie6)
{
	syn_answered(NT_SYN_COOKIE);
	return 0;
}

SEC("kretprobe/tcp_conn_request")
int BPF_KRETPROBE(syn_kretprobe)
{
	syn_end();
	return 0;
}
