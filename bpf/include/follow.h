/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Following a flow past NAT and encapsulation: the packets and conntrack
 * entries that matched the filter once, and the quiet segments of
 * established connections that are reported only where they are dropped.
 */
#ifndef NETTRACE_FOLLOW_H
#define NETTRACE_FOLLOW_H

#include "maps.h"
#include "parse.h"
#include "filter.h"

static __always_inline bool nt_tracking_active(void)
{
	__u32 key = 0;
	__u32 *on = bpf_map_lookup_elem(&tracking, &key);

	return on && *on;
}

static __always_inline void nt_track_tuple(struct nt_tuple *t)
{
	struct nt_tuple rev = { .sport = t->dport, .dport = t->sport, .proto = t->proto, .ipv6 = t->ipv6 };
	__u8 one = 1;

	__builtin_memcpy(rev.saddr, t->daddr, sizeof(rev.saddr));
	__builtin_memcpy(rev.daddr, t->saddr, sizeof(rev.daddr));

	t->tcp_flags = 0;
	bpf_map_update_elem(&tracked_tuple, t, &one, BPF_ANY);
	bpf_map_update_elem(&tracked_tuple, &rev, &one, BPF_ANY);
}

/* Follows both directions of a conntrack entry by tuple. NAT rewrites the
 * reply tuple of a new entry, so the nat point calls this again after it. */
static __always_inline void nt_track_ct_tuples(__u64 ct)
{
	struct nf_conn *conn = (struct nf_conn *)ct;
	struct nt_tuple t = {};

	nt_read_ct_tuple(&conn->tuplehash[0].tuple, &t);
	nt_track_tuple(&t);
	nt_read_ct_tuple(&conn->tuplehash[1].tuple, &t);
	nt_track_tuple(&t);
}

#define NT_FOLLOWED_SKB 1 /* tracked_skb mark of a reported packet */
#define NT_QUIET_SKB 2    /* tracked_skb mark of a quiet packet */

/* IPv4 addresses are zero past their first word, so one comparison holds
 * for both families. */
static __always_inline bool nt_same_addr(const __u32 *a, const __u32 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static __always_inline bool nt_same_tuple(const struct nt_tuple *a, const struct nt_tuple *b)
{
	return nt_same_addr(a->saddr, b->saddr) && nt_same_addr(a->daddr, b->daddr) && a->sport == b->sport &&
	       a->dport == b->dport && a->proto == b->proto;
}

static __always_inline void nt_track(__u64 skb, __u64 ct, const struct nt_tuple *t)
{
	struct followed_skb f = { .ct = ct, .mark = NT_FOLLOWED_SKB };
	struct nt_tuple orig;

	if (skb && t) {
		f.tuple = *t;
		f.tuple.tcp_flags = 0;
		bpf_map_update_elem(&tracked_skb, &skb, &f, BPF_ANY);
	}
	if (ct) {
		nt_read_ct_tuple(&((struct nf_conn *)ct)->tuplehash[0].tuple, &orig);
		bpf_map_update_elem(&tracked_ct, &ct, &orig, BPF_ANY);
		nt_track_ct_tuples(ct);
	}
	if (!nt_tracking_active()) {
		__u32 key = 0, on = 1;

		bpf_map_update_elem(&tracking, &key, &on, BPF_ANY);
	}
}

/* nt_follow's verdicts. */
#define NT_SKIP 0   /* not followed */
#define NT_REPORT 1 /* followed and reported */
#define NT_QUIET 2  /* followed, reported only if dropped */

/* A TCP segment without SYN, FIN or RST (data or an ACK), unless every
 * packet is wanted: what an established connection mostly carries. */
static __always_inline bool nt_plain_segment(const struct nt_tuple *c)
{
	return !all_packets && c->proto == IPPROTO_TCP &&
	       !(c->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_FIN | TCP_FLAG_RST));
}

/* A data or ACK segment of an established (ASSURED) TCP connection tells
 * nothing the explanations need unless it is dropped: reporting each at
 * every hook of every namespace would cost more than the traffic. */
static __always_inline bool nt_quiet(__u64 ct, const struct nt_tuple *t, const struct nt_tuple *inner)
{
	const struct nt_tuple *c = inner ? inner : t;

	return c && ct && nt_plain_segment(c) && (nt_ct_status((struct nf_conn *)ct) & IPS_ASSURED);
}

/* Whether a packet is one that is never reported except where it is
 * dropped: a plain segment of an established connection (its conntrack
 * entry ASSURED; where conntrack does not run, any, so the handshake's last
 * ACK is not reported there either). Decided before any map lookup or
 * filter, as most packets of a busy node are such segments, followed or
 * not; the drop point, which reports them, does not ask. An encapsulated
 * packet's entry is the tunnel's, which says nothing of the connection
 * inside. */
static __always_inline bool nt_unremarkable(__u64 ct, const struct nt_tuple *t, const struct nt_tuple *inner)
{
	const struct nt_tuple *c = inner ? inner : t;

	return nt_plain_segment(c) && (inner || !ct || (nt_ct_status((struct nf_conn *)ct) & IPS_ASSURED));
}

/* The event's inner tuple, or NULL. The choice stays a branch: clang
 * would otherwise compute it as an AND mask on the pointer, which the
 * verifier refuses ("bitwise operator &= on pointer prohibited"). */
static __always_inline const struct nt_tuple *nt_inner(struct nt_event *e)
{
	const struct nt_tuple *inner = NULL;

	if (e->flags & NT_F_INNER) {
		inner = &e->inner;
		barrier_var(inner);
	}
	return inner;
}

/* The followed packet at this skb address, if the packet there now is it:
 * it still has the tuple it was last seen with (or carries it inside a
 * tunnel), or it is in the same conntrack entry (NAT changed its tuple). */
static __always_inline struct followed_skb *nt_followed_skb(__u64 skb, __u64 ct, const struct nt_tuple *t,
							  const struct nt_tuple *inner)
{
	struct followed_skb *f = skb ? bpf_map_lookup_elem(&tracked_skb, &skb) : NULL;

	if (!f)
		return NULL;
	if ((t && nt_same_tuple(&f->tuple, t)) || (inner && nt_same_tuple(&f->tuple, inner)) ||
	    (ct && f->ct == ct)) {
		if (t && !inner) {
			f->tuple = *t;
			f->tuple.tcp_flags = 0;
		}
		if (ct)
			f->ct = ct;
		return f;
	}
	return NULL;
}


/* Whether the conntrack entry at this address is the one followed. */
static __always_inline bool nt_followed_ct(__u64 ct)
{
	struct nt_tuple *orig = ct ? bpf_map_lookup_elem(&tracked_ct, &ct) : NULL;
	struct nt_tuple now;

	if (!orig)
		return false;
	nt_read_ct_tuple(&((struct nf_conn *)ct)->tuplehash[0].tuple, &now);
	return nt_same_tuple(orig, &now);
}

/* Decides whether an observation is reported: the packet or its conntrack
 * entry was followed before, or one of its tuples matches the filter. A
 * match starts following both the packet and its conntrack entry (so the
 * reply, whose tuple differs after NAT, is followed too). A packet found
 * quiet is remembered so, so that its later hops cost one lookup. */
static __always_inline int nt_follow(__u64 skb, __u64 ct, const struct nt_tuple *t,
				     const struct nt_tuple *inner)
{
	bool skb_known = false, ct_known = false;
	struct followed_skb *followed;
	struct nt_tuple key;

	if (filter_len == 0)
		return nt_quiet(ct, t, inner) ? NT_QUIET : NT_REPORT;
	if (nt_tracking_active()) {
		followed = nt_followed_skb(skb, ct, t, inner);
		if (followed && followed->mark == NT_QUIET_SKB)
			return NT_QUIET;
		skb_known = followed != NULL;
		ct_known = nt_followed_ct(ct);
		/* A packet of a followed connection counts as a filter match:
		 * it starts following its own skb and entry. Inside a tunnel,
		 * the connection is the inner one. */
		if (!skb_known && !ct_known && (inner || t)) {
			key = inner ? *inner : *t;
			key.tcp_flags = 0;
			if (bpf_map_lookup_elem(&tracked_tuple, &key))
				goto matched;
		}
	}
	if (!skb_known && !ct_known) {
		if (!(t && nt_filter_match(t)) && !(inner && nt_filter_match(inner)))
			return NT_SKIP;
	}
matched:
	if (!skb_known || (ct && !ct_known))
		nt_track(skb_known ? 0 : skb, ct_known ? 0 : ct, inner ? inner : t);
	if (nt_quiet(ct, t, inner)) {
		followed = skb ? bpf_map_lookup_elem(&tracked_skb, &skb) : NULL;
		if (followed)
			followed->mark = NT_QUIET_SKB;
		return NT_QUIET;
	}
	return NT_REPORT;
}

/* A lookup first: it takes no lock, a delete does, and most packets were
 * never followed. */
static __always_inline void nt_untrack_skb(__u64 skb)
{
	if (filter_len && nt_tracking_active() && bpf_map_lookup_elem(&tracked_skb, &skb))
		bpf_map_delete_elem(&tracked_skb, &skb);
}

#endif
