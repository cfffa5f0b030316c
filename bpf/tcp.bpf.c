// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tcp: what the TCP state machine does with a followed flow: SYN-ACK
 * retransmits, resets sent and received, and state changes (a connect that
 * times out goes SYN_SENT -> CLOSE).
 *
 * Tuples are from the local socket's point of view (local -> remote);
 * for a reset, the direction of the reset itself.
 */
#include "common.h"

#define AF_INET 2
#define AF_INET6 10

/* A socket's tuple, in the family of its packets: an IPv6 socket talking
 * to an IPv4-mapped address sends IPv4, and keeps the IPv4 addresses in
 * the same fields as an IPv4 socket. False for other families. */
static __always_inline bool tcp_sock_tuple(const struct sock_common *skc, struct nt_tuple *t)
{
	__u16 family = BPF_CORE_READ(skc, skc_family);
	struct in6_addr daddr;

	if (family != AF_INET && family != AF_INET6)
		return false;
	t->sport = BPF_CORE_READ(skc, skc_num);
	t->dport = bpf_ntohs(BPF_CORE_READ(skc, skc_dport));
	t->proto = IPPROTO_TCP;
	if (family == AF_INET6) {
		daddr = BPF_CORE_READ(skc, skc_v6_daddr);
		if (!(daddr.in6_u.u6_addr32[0] == 0 && daddr.in6_u.u6_addr32[1] == 0 &&
		      daddr.in6_u.u6_addr32[2] == bpf_htonl(0xffff))) {
			t->ipv6 = 1;
			__builtin_memcpy(t->daddr, &daddr, sizeof(t->daddr));
			daddr = BPF_CORE_READ(skc, skc_v6_rcv_saddr);
			__builtin_memcpy(t->saddr, &daddr, sizeof(t->saddr));
			return true;
		}
	}
	t->saddr[0] = BPF_CORE_READ(skc, skc_rcv_saddr);
	t->daddr[0] = BPF_CORE_READ(skc, skc_daddr);
	return true;
}

/* Reports an event of socket skc (NULL: the event's tuple names it).
 * failure: the event is evidence of failure (nt_submit_as). */
static __always_inline void tcp_report(const struct sock_common *skc, struct nt_event *e, bool failure)
{
	if (!e->tuple.proto && (!skc || !tcp_sock_tuple(skc, &e->tuple)))
		return;
	if (skc) {
		if (!e->netns)
			e->netns = BPF_CORE_READ(skc, skc_net.net, ns.inum);
		e->u.tcp.cookie = bpf_get_socket_cookie((void *)skc);
	}
	if (!nt_netns_watched(e->netns))
		return;
	if (nt_follow(e->skb, 0, &e->tuple, NULL) == NT_SKIP)
		return;
	nt_submit_as(e, failure);
}

SEC("tp_btf/tcp_retransmit_synack")
int BPF_PROG(tcp_synack_retrans, const struct sock *sk, const struct request_sock *req)
{
	NT_EVENT(e);

	if (!e)
		return 0;

	nt_init(e, NT_POINT_TCP, NT_KIND_TCP_SYNACK_RETRANS, 0);
	/* The listener's SYN-ACK went unanswered. */
	tcp_report(&req->__req_common, e, true);
	return 0;
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(tcp_rst_sent, const struct sock *sk, const struct sk_buff *skb)
{
	NT_EVENT(e);
	struct nt_tuple in = {};
	bool refused = false;

	if (!e)
		return 0;

	nt_init(e, NT_POINT_TCP, NT_KIND_TCP_RST_SENT, (__u64)skb);
	/* The skb is the packet being answered: the reset goes the other way. */
	if (skb && nt_parse_skb((struct sk_buff *)skb, false, e, NULL, false)) {
		in = e->tuple;
		__builtin_memcpy(e->tuple.saddr, in.daddr, sizeof(e->tuple.saddr));
		__builtin_memcpy(e->tuple.daddr, in.saddr, sizeof(e->tuple.daddr));
		e->tuple.sport = in.dport;
		e->tuple.dport = in.sport;
		e->tuple.tcp_flags = 0;
		refused = in.tcp_flags & TCP_FLAG_SYN;
		nt_fill_dev(BPF_CORE_READ(skb, dev), e);
	}
	/* A listener answers a segment no connection owns (an ACK after its
	 * connection closed) with its own socket: that socket names no
	 * connection, and its cookie would join every connection it reset. */
	if (sk && BPF_CORE_READ(sk, __sk_common.skc_state) == TCP_LISTEN) {
		e->netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
		sk = NULL;
	}
	tcp_report(sk ? &sk->__sk_common : NULL, e, refused);
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(tcp_rst_recv, const struct sock *sk)
{
	NT_EVENT(e);

	if (!e)
		return 0;

	nt_init(e, NT_POINT_TCP, NT_KIND_TCP_RST_RECV, 0);
	/* A reset answering this socket's SYN: the connection refused. */
	tcp_report(&sk->__sk_common, e, BPF_CORE_READ(sk, __sk_common.skc_state) == TCP_SYN_SENT);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tcp_state, const struct sock *sk, int oldstate, int newstate)
{
	NT_EVENT(e);

	if (!e)
		return 0;

	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	nt_init(e, NT_POINT_TCP, NT_KIND_TCP_STATE, 0);
	e->u.tcp.oldstate = oldstate;
	e->u.tcp.newstate = newstate;
	/* A connect given up: evidence of failure. */
	tcp_report(&sk->__sk_common, e, oldstate == TCP_SYN_SENT && newstate == TCP_CLOSE);
	return 0;
}
