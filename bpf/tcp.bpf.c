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
 * the same fields as an IPv4 socket. False for other families. Every
 * program here is tp_btf, whose socket is a BTF pointer: its fields are
 * loaded directly (PROBE_MEM loads), not through a helper call each. */
static __always_inline bool tcp_sock_tuple(const struct sock_common *skc, struct nt_tuple *t)
{
	__u16 family = skc->skc_family;
	const __u32 *daddr;

	if (family != AF_INET && family != AF_INET6)
		return false;
	t->sport = skc->skc_num;
	t->dport = bpf_ntohs(skc->skc_dport);
	t->proto = IPPROTO_TCP;
	if (family == AF_INET6) {
		daddr = skc->skc_v6_daddr.in6_u.u6_addr32;
		if (!(daddr[0] == 0 && daddr[1] == 0 && daddr[2] == bpf_htonl(0xffff))) {
			t->ipv6 = 1;
			for (int i = 0; i < 4; i++) {
				t->daddr[i] = daddr[i];
				t->saddr[i] = skc->skc_v6_rcv_saddr.in6_u.u6_addr32[i];
			}
			return true;
		}
	}
	t->saddr[0] = skc->skc_rcv_saddr;
	t->daddr[0] = skc->skc_daddr;
	return true;
}

/* Whether an event of socket skc (NULL: the event's tuple names it) about
 * packet skb (0: none) is reported, decided on an event cleared by
 * nt_init_decision only: tcp_state runs at every state change of every TCP
 * socket on the host, and most are not reported, so the rest of the event
 * is cleared and the socket's cookie taken only for those that are
 * (tcp_submit). */
static __always_inline bool tcp_decide(const struct sock_common *skc, struct nt_event *e, __u64 skb)
{
	if (!e->tuple.proto && (!skc || !tcp_sock_tuple(skc, &e->tuple)))
		return false;
	if (skc && !e->netns)
		e->netns = skc->skc_net.net->ns.inum;
	if (!nt_netns_watched(e->netns))
		return false;
	return nt_follow(skb, 0, &e->tuple, NULL) != NT_SKIP;
}

/* Submits an event decided on (tcp_decide), after nt_init_rest and its
 * payload. failure: the event is evidence of failure (nt_submit_as). */
static __always_inline void tcp_submit(const struct sock_common *skc, struct nt_event *e, bool failure)
{
	if (skc)
		e->u.tcp.cookie = bpf_get_socket_cookie((void *)skc);
	nt_submit_as(e, failure);
}

/* Reports an event of socket skc without a packet or payload of its own. */
static __always_inline void tcp_report_sock(const struct sock_common *skc, struct nt_event *e, __u8 kind,
					    bool failure)
{
	nt_init_decision(e);
	if (!tcp_decide(skc, e, 0))
		return;
	nt_init_rest(e, NT_POINT_TCP, kind, 0);
	tcp_submit(skc, e, failure);
}

SEC("tp_btf/tcp_retransmit_synack")
int BPF_PROG(tcp_synack_retrans, const struct sock *sk, const struct request_sock *req)
{
	NT_EVENT(e);

	if (!e)
		return 0;

	/* The listener's SYN-ACK went unanswered. */
	tcp_report_sock(&req->__req_common, e, NT_KIND_TCP_SYNACK_RETRANS, true);
	return 0;
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(tcp_rst_sent, const struct sock *sk, const struct sk_buff *skb)
{
	const struct sock_common *skc = sk ? &sk->__sk_common : NULL;
	struct net_device *dev = NULL;
	NT_EVENT(e);
	struct nt_tuple in = {};
	bool refused = false;

	if (!e)
		return 0;

	nt_init_decision(e);
	/* The skb is the packet being answered: the reset goes the other way. */
	if (skb && nt_parse_skb((struct sk_buff *)skb, false, e, NULL, true)) {
		in = e->tuple;
		__builtin_memcpy(e->tuple.saddr, in.daddr, sizeof(e->tuple.saddr));
		__builtin_memcpy(e->tuple.daddr, in.saddr, sizeof(e->tuple.daddr));
		e->tuple.sport = in.dport;
		e->tuple.dport = in.sport;
		e->tuple.tcp_flags = 0;
		refused = in.tcp_flags & TCP_FLAG_SYN;
		dev = skb->dev;
		if (dev)
			e->netns = nt_dev_netns(dev, true);
	}
	/* A listener answers a segment no connection owns (an ACK after its
	 * connection closed) with its own socket: that socket names no
	 * connection, and its cookie would join every connection it reset. */
	if (skc && skc->skc_state == TCP_LISTEN) {
		e->netns = skc->skc_net.net->ns.inum;
		skc = NULL;
	}
	if (!tcp_decide(skc, e, (__u64)skb))
		return 0;
	nt_init_rest(e, NT_POINT_TCP, NT_KIND_TCP_RST_SENT, (__u64)skb);
	nt_fill_dev(dev, e);
	tcp_submit(skc, e, refused);
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(tcp_rst_recv, const struct sock *sk)
{
	NT_EVENT(e);

	if (!e)
		return 0;

	/* A reset answering this socket's SYN: the connection refused. */
	tcp_report_sock(&sk->__sk_common, e, NT_KIND_TCP_RST_RECV, sk->__sk_common.skc_state == TCP_SYN_SENT);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tcp_state, const struct sock *sk, int oldstate, int newstate)
{
	NT_EVENT(e);

	if (!e)
		return 0;

	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;
	nt_init_decision(e);
	if (!tcp_decide(&sk->__sk_common, e, 0))
		return 0;
	nt_init_rest(e, NT_POINT_TCP, NT_KIND_TCP_STATE, 0);
	e->u.tcp.oldstate = oldstate;
	e->u.tcp.newstate = newstate;
	/* A connect given up: evidence of failure. */
	tcp_submit(&sk->__sk_common, e, oldstate == TCP_SYN_SENT && newstate == TCP_CLOSE);
	return 0;
}
