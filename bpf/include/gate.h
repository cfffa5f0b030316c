/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The gate (--healthy count): with no filter, an IPv4 TCP connection's
 * records stay in the kernel (the held map) while it looks healthy. A
 * connection that ends normally (a FIN or reset after the handshake) drops
 * them and is only counted; one that shows trouble ships what it held, in
 * order, then everything after it, as without the gate. Trouble is:
 * a record its point judges evidence of failure (a drop with a reason, a
 * listener's refusal, a reset refusing it, a SYN-ACK sent again, a connect
 * given up), a packet conntrack judged INVALID, a SYN sent again (another
 * packet, the same sequence number), and a reset before the handshake was
 * answered. Whatever a connection in trouble lacks (evicted, over its
 * bound, dropped once it had ended) is counted missing, which user space
 * counts as lost: a flow open meanwhile is incomplete, never the ground for
 * a finding that rests on an absence. pkg/explain's rules state which of
 * these triggers carry their evidence (Rule.Triggers).
 *
 * A connection is known by the canonical tuples of its packets (struct
 * nt_conn_key): the first seen names it, and its other tuples (after NAT,
 * the entry's reply tuple; inside the tunnel on the other node) are aliases
 * of it, learnt from its conntrack entries as its records pass. An ICMP
 * error goes with the connection it quotes. A SYN with another sequence
 * number, or after the last connection ended, begins the tuple's next
 * connection (a client port reused). A connect's first state change,
 * before its port is chosen, is dropped: it names no connection yet.
 *
 * What the gate cannot show: a healthy connection's steps (it is a count);
 * a connection that fails without any trigger (a reply lost after every
 * hook, never retransmitted); the records still held when nettrace stops.
 * IPv6, UDP and ICMP (but errors quoting TCP) are not held: they ship.
 */
#ifndef NETTRACE_GATE_H
#define NETTRACE_GATE_H

#include "maps.h"
#include "parse.h"

/* The gate is compiled in only with NT_GATE: its functions are BPF
 * subprograms (inlined, they took the transmit site past the 32K
 * instructions a jump reaches), and a kernel whose verifier sums every
 * call's stack statically (6.1: the programs use 496 bytes, any call
 * takes them past 512) refuses a program that merely contains a call. The
 * loader builds each object twice (internal/probe/gen.go) and loads the
 * gated one only for --healthy count. The gated objects are built for BPF
 * v3, whose atomic fetches (5.12) let CPUs agree on a connection's held
 * records; every kernel that takes their calls has them. */
#ifdef NT_GATE

static __always_inline void nt_gate_count(__u32 stat, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&gate_stats, &stat);

	if (v)
		*v += n;
}

static __always_inline void nt_conn_key(struct nt_conn_key *k, const struct nt_tuple *t)
{
	__u32 a = t->saddr[0], b = t->daddr[0];
	__u16 pa = t->sport, pb = t->dport;

	k->proto = t->proto;
	k->_pad[0] = k->_pad[1] = k->_pad[2] = 0;
	if (a < b || (a == b && pa <= pb)) {
		k->addr_lo = a, k->addr_hi = b, k->port_lo = pa, k->port_hi = pb;
		return;
	}
	k->addr_lo = b, k->addr_hi = a, k->port_lo = pb, k->port_hi = pa;
}

static __always_inline bool nt_conn_key_eq(const struct nt_conn_key *a, const struct nt_conn_key *b)
{
	const __u64 *x = (const void *)a, *y = (const void *)b;

	_Static_assert(sizeof(struct nt_conn_key) == 16, "a key is two words");
	return x[0] == y[0] && x[1] == y[1];
}

/* Adds an event to the view of its record's connection: first, the
 * record's first event. Only a packet's own steps name the connection: a
 * socket's event joining a journey may be another connection's. */
static __noinline void nt_conn_view_add(struct nt_conn_view *v, const struct nt_event *e, bool first)
{
	const struct nt_tuple *p = (e->flags & NT_F_INNER) ? &e->inner : &e->tuple;
	struct nt_conn_key reply;

	if (first) {
		__builtin_memset(v, 0, sizeof(*v));
		v->gated = 1;
		v->skb = e->skb;
		v->skb_seen = e->skb_seen;
	}
	if (e->flags & NT_F_CT_INVALID)
		v->invalid = 1;
	if (!p->proto || v->quoted || (!first && e->point == NT_POINT_TCP) || (!first && e->point == NT_POINT_SYN))
		return;
	if (p->ipv6 || p->proto != IPPROTO_TCP) {
		v->gated = 0;
		return;
	}
	if (!(v->keys & NT_VIEW_PKT)) {
		nt_conn_key(&v->pkt, p);
		v->keys |= NT_VIEW_PKT;
		v->unbound = !p->sport || !p->dport;
	}
	v->tcp_flags |= p->tcp_flags;
	/* An encapsulated packet's entry is the tunnel's. */
	if ((e->flags & (NT_F_CT | NT_F_INNER)) != NT_F_CT || (v->keys & NT_VIEW_CT) || e->ct.orig.ipv6 ||
	    e->ct.orig.proto != IPPROTO_TCP)
		return;
	nt_conn_key(&v->ct, &e->ct.orig);
	v->keys |= NT_VIEW_CT;
	nt_conn_key(&reply, &e->ct.reply);
	if (!nt_conn_key_eq(&reply, &v->ct)) {
		v->nat = reply;
		v->keys |= NT_VIEW_NAT;
	}
}

/* ICMP errors that quote the packet they are about (destination
 * unreachable, source quench, redirect, time exceeded, parameter problem). */
static __always_inline bool nt_icmp_quotes(__u8 type)
{
	return type == 3 || type == 4 || type == 5 || type == 11 || type == 12;
}

/* An ICMP error belongs to the connection whose packet it quotes: its view
 * takes the quoted tuple's key (the key has no direction), so that it is
 * held, shipped or dropped with that connection. Read from the packet:
 * the quoted IPv4 header follows the 8-byte ICMP header. */
static __always_inline void nt_conn_view_icmp(struct nt_conn_view *v, unsigned char *head, __u32 off)
{
	struct nt_tuple q = {};
	__u8 ip[20], ports[4];

	if (bpf_probe_read_kernel(ip, 1, head + off))
		return;
	off += (ip[0] & 0xf) * 4 + 8;
	if (bpf_probe_read_kernel(ip, sizeof(ip), head + off) || ip[9] != IPPROTO_TCP)
		return;
	off += (ip[0] & 0xf) * 4;
	if (bpf_probe_read_kernel(ports, sizeof(ports), head + off))
		return;
	q.proto = IPPROTO_TCP;
	__builtin_memcpy(&q.saddr[0], &ip[12], 4);
	__builtin_memcpy(&q.daddr[0], &ip[16], 4);
	q.sport = ports[0] << 8 | ports[1];
	q.dport = ports[2] << 8 | ports[3];
	nt_conn_key(&v->pkt, &q);
	v->keys = NT_VIEW_PKT;
	v->gated = 1;
	v->unbound = 0;
	v->quoted = 1;
}

/* A SYN's sequence number, which tells a SYN sent again (the same) from
 * the next connection on a reused port (another). */
static __always_inline void nt_conn_view_seq(struct nt_conn_view *v, unsigned char *head, __u32 off)
{
	__u8 ihl;
	__be32 seq;

	if (bpf_probe_read_kernel(&ihl, 1, head + off) ||
	    bpf_probe_read_kernel(&seq, sizeof(seq), head + off + (ihl & 0xf) * 4 + 4))
		return;
	v->syn_seq = bpf_ntohl(seq);
	v->syn_seq_known = 1;
}

/* What the view of a record's first event reads from its packet: an ICMP
 * error's quoted connection, a SYN's sequence number. Not for a packet
 * inside a tunnel, whose headers at the network offset are the outer
 * ones. */
static __always_inline void nt_conn_view_packet(struct nt_conn_view *v, const struct nt_event *e,
						struct sk_buff *skb, bool use_data, bool direct)
{
	unsigned char *head;

	if (!skb || (e->flags & NT_F_INNER) || e->tuple.ipv6)
		return;
	if (e->tuple.proto == IPPROTO_ICMP && nt_icmp_quotes(e->tuple.sport >> 8)) {
		head = NT_RD(direct, skb, head);
		nt_conn_view_icmp(v, head, nt_l3_offset(skb, head, use_data, direct));
	} else if (e->tuple.proto == IPPROTO_TCP && (e->tuple.tcp_flags & TCP_FLAG_SYN)) {
		head = NT_RD(direct, skb, head);
		nt_conn_view_seq(v, head, nt_l3_offset(skb, head, use_data, direct));
	}
}

enum nt_gate_verdict {
	NT_GATE_SHIP,
	NT_GATE_HOLD,
	NT_GATE_DROP,
};

/* Whether the gate runs: asked for, and no filter (a filter's connections
 * are wanted whole). */
static __always_inline bool nt_gate_on(void)
{
	return healthy_count && filter_len == 0;
}

NT_SLOT_STACK(gate, struct nt_gate_scratch, gate_slots, NT_GATE_DEPTH)

/* Declares g, a gate slot given back when g goes out of scope (NULL: none
 * free, the record ships). */
#define NT_GATE_SCRATCH(g) struct nt_gate_scratch *g __attribute__((cleanup(nt_gate_give))) = nt_gate_take()

/* The connection entry a key names: its own, or the one it is an alias of.
 * root is set to the entry's key. */
static __always_inline struct nt_conn *nt_conn_lookup(const struct nt_conn_key *k, struct nt_conn_key *root)
{
	struct nt_conn *c = bpf_map_lookup_elem(&conns, k);

	if (!c)
		return NULL;
	if (!c->alias) {
		*root = *k;
		return c;
	}
	*root = c->root;
	c = bpf_map_lookup_elem(&conns, root);
	/* An alias of an alias never exists: aliases name entries of their own
	 * only; an entry evicted since is not followed further. */
	return c && !c->alias ? c : NULL;
}

/* Makes k an alias of the entry at root, unless it is that entry's key or
 * names an entry already. */
static __always_inline void nt_conn_alias(struct nt_gate_scratch *g, const struct nt_conn_key *k)
{
	if (nt_conn_key_eq(k, &g->root) || bpf_map_lookup_elem(&conns, k))
		return;
	__builtin_memset(&g->fresh, 0, sizeof(g->fresh));
	g->fresh.root = g->root;
	g->fresh.alias = 1;
	bpf_map_update_elem(&conns, k, &g->fresh, BPF_NOEXIST);
}

/* A new use of a connection's tuple: nothing held, nothing seen. */
static __always_inline void nt_conn_begin(struct nt_conn *c, __u8 state)
{
	c->gid = bpf_ktime_get_ns() << 6 | (bpf_get_smp_processor_id() & 63);
	c->syn_skb = c->syn_seen = 0;
	c->held = c->missed = 0;
	c->stored = c->claimed = 0;
	c->state = state;
	c->seen = 0;
}

/* The connection of a view, its entry made (in state) where it has none,
 * and the view's other keys made its aliases. */
static __always_inline struct nt_conn *nt_conn_of(const struct nt_conn_view *v, struct nt_gate_scratch *g, __u8 state)
{
	struct nt_conn *c = NULL;

	if (v->keys & NT_VIEW_CT)
		c = nt_conn_lookup(&v->ct, &g->root);
	if (!c && (v->keys & NT_VIEW_NAT))
		c = nt_conn_lookup(&v->nat, &g->root);
	if (!c)
		c = nt_conn_lookup(&v->pkt, &g->root);
	if (!c) {
		g->root = (v->keys & NT_VIEW_CT) ? v->ct : v->pkt;
		__builtin_memset(&g->fresh, 0, sizeof(g->fresh));
		g->fresh.root = g->root;
		nt_conn_begin(&g->fresh, state);
		bpf_map_update_elem(&conns, &g->root, &g->fresh, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&conns, &g->root);
		if (!c || c->alias)
			return NULL;
	}
	if (v->keys & NT_VIEW_CT)
		nt_conn_alias(g, &v->ct);
	if (v->keys & NT_VIEW_NAT)
		nt_conn_alias(g, &v->nat);
	nt_conn_alias(g, &v->pkt);
	return c;
}

/* Drops what a connection holds, and returns how many it held. */
static __noinline __u32 nt_gate_drop_held(struct nt_conn *c, struct nt_held_key *k)
{
	__u32 n = c->held;

	k->gid = c->gid;
	k->_pad = 0;
	for (__u32 i = 0; i < NT_HELD_PER_CONN; i++) {
		if (i >= n)
			break;
		k->seq = i;
		bpf_map_delete_elem(&held, k);
	}
	return n < NT_HELD_PER_CONN ? n : NT_HELD_PER_CONN;
}

/* Puts a held record (h: a struct nt_held, in the map or a holder's own
 * copy) on the ring buffer; counts it released, or missing when the ring is
 * full. */
static __always_inline void nt_gate_ship(const struct nt_held *h)
{
	__u32 len = h->len;

	/* The bound is for the verifier: len was at most this when held. */
	if (len > sizeof(h->rec) || bpf_ringbuf_output(&events, (void *)h->rec, len, 0))
		nt_gate_count(NT_GATE_MISSING, 1);
	else
		nt_gate_count(NT_GATE_RELEASED, 1);
}

/* Ships what a connection in trouble held, in the order it was made, and
 * counts what it lacks. A record is shipped by one CPU only: the one that
 * sets its claimed bit first, this or its holder (nt_gate_hold). A record
 * whose stored bit is unset is still being held on another CPU, or its hold
 * failed (counted there): its holder finds the connection shipping and
 * ships it. That needs the exchange below, a full barrier between the
 * state's store and the reads of stored, matching the holder's between its
 * bit's store and its read of the state (Dekker's pattern): either this
 * sees the bit, or the holder sees the state. */
static __noinline void nt_gate_release(struct nt_conn *c, struct nt_held_key *k)
{
	__u32 n, bit, missing;
	struct nt_held *h;

	__sync_lock_test_and_set(&c->state, NT_CONN_SHIPPING);
	n = c->held < NT_HELD_PER_CONN ? c->held : NT_HELD_PER_CONN;
	missing = c->missed;
	k->gid = c->gid;
	k->_pad = 0;
	nt_gate_count(NT_GATE_TRIGGERED, 1);
	for (__u32 i = 0; i < NT_HELD_PER_CONN; i++) {
		if (i >= n)
			break;
		bit = 1u << i;
		if (!(*(volatile __u32 *)&c->stored & bit) || (__sync_fetch_and_or(&c->claimed, bit) & bit))
			continue;
		k->seq = i;
		h = bpf_map_lookup_elem(&held, k);
		if (!h) {
			missing++; /* evicted */
			continue;
		}
		nt_gate_ship(h);
		bpf_map_delete_elem(&held, k);
	}
	if (missing)
		nt_gate_count(NT_GATE_MISSING, missing);
}

/* Whether a view's record shows its connection in trouble, beyond what its
 * point judged: conntrack found a packet INVALID, a SYN went out again (a
 * SYN of another packet than the first), or a reset came before the
 * handshake completed. */
static __always_inline bool nt_gate_trouble(const struct nt_conn *c, const struct nt_conn_view *v)
{
	bool syn = (v->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;

	return v->invalid || (syn && (c->seen & NT_SEEN_SYN) && (c->syn_skb != v->skb || c->syn_seen != v->skb_seen)) ||
	       ((v->tcp_flags & TCP_FLAG_RST) && !(c->seen & NT_SEEN_SYNACK));
}

/* Whether a SYN begins the tuple's next connection (a client port
 * reused): the last one ended, or the SYN's sequence number is another
 * than the first SYN's. Where either number is unknown, a SYN of another
 * packet after the handshake was answered. A SYN sent again keeps its
 * sequence number: it stays its connection's. */
static __always_inline bool nt_gate_next_conn(const struct nt_conn *c, const struct nt_conn_view *v)
{
	if (c->state == NT_CONN_ENDED)
		return true;
	if (!(c->seen & NT_SEEN_SYN))
		return false;
	if ((c->seen & NT_SEEN_SEQ) && v->syn_seq_known)
		return c->syn_seq != v->syn_seq;
	return (c->seen & NT_SEEN_SYNACK) && (c->syn_skb != v->skb || c->syn_seen != v->skb_seen);
}

/* Ends a connection normally: what it held is dropped and counted, with
 * the record that ended it. */
static __always_inline void nt_gate_end(struct nt_conn *c, struct nt_held_key *k)
{
	c->state = NT_CONN_ENDED;
	nt_gate_count(NT_GATE_HEALTHY, 1);
	nt_gate_count(NT_GATE_DISCARDED, nt_gate_drop_held(c, k) + 1);
}

/* Decides what becomes of a record whose connection v views: shipped, held
 * (at g->key), or dropped as a healthy connection's. failure: its point
 * judged it evidence of failure. The counters count records. */
static __noinline enum nt_gate_verdict nt_gate(const struct nt_conn_view *v, struct nt_gate_scratch *g, bool failure)
{
	bool syn = (v->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
	struct nt_conn *c;

	if (!v->gated || !(v->keys & NT_VIEW_PKT))
		return NT_GATE_SHIP;
	/* A connect's first state change, before its port was chosen, names
	 * no connection yet: every connection of a client to one service
	 * would share its key. Dropped, and counted with the healthy: no rule
	 * rests on it, and the socket's later events (with its port) join the
	 * flow as it did. */
	if (v->unbound && !failure) {
		nt_gate_count(NT_GATE_DISCARDED, 1);
		return NT_GATE_DROP;
	}
	c = nt_conn_of(v, g, failure ? NT_CONN_SHIPPING : NT_CONN_HOLDING);
	if (!c)
		return NT_GATE_SHIP;
	/* The tuple's next connection (a client port reused): a SYN after the
	 * last one ended, or after its handshake was answered (it may have
	 * ended unseen). What a healthy one still held is dropped. A SYN sent
	 * again before any answer stays its connection's. */
	if (syn && !failure && nt_gate_next_conn(c, v)) {
		if (c->state == NT_CONN_HOLDING)
			nt_gate_count(NT_GATE_DISCARDED, nt_gate_drop_held(c, &g->key));
		nt_conn_begin(c, NT_CONN_HOLDING);
	}
	if (c->state == NT_CONN_SHIPPING) {
		if ((v->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == (TCP_FLAG_SYN | TCP_FLAG_ACK))
			c->seen |= NT_SEEN_SYNACK;
		return NT_GATE_SHIP;
	}
	if (c->state == NT_CONN_ENDED) {
		if (!failure && !v->invalid) {
			nt_gate_count(NT_GATE_DISCARDED, 1);
			return NT_GATE_DROP;
		}
		/* Its earlier records were dropped: what it ships now lacks them.
		 * Counted apart too: that is the gate's design, where the other
		 * missing records are losses. */
		c->state = NT_CONN_SHIPPING;
		nt_gate_count(NT_GATE_TRIGGERED, 1);
		nt_gate_count(NT_GATE_MISSING, 1);
		nt_gate_count(NT_GATE_ENDED_THEN_TROUBLE, 1);
		return NT_GATE_SHIP;
	}
	if (failure || nt_gate_trouble(c, v)) {
		nt_gate_release(c, &g->key);
		return NT_GATE_SHIP;
	}
	if (syn && !(c->seen & NT_SEEN_SYN)) {
		c->syn_skb = v->skb;
		c->syn_seen = v->skb_seen;
		c->seen |= NT_SEEN_SYN;
	}
	if (syn && v->syn_seq_known && !(c->seen & NT_SEEN_SEQ)) {
		c->syn_seq = v->syn_seq;
		c->seen |= NT_SEEN_SEQ;
	}
	if ((v->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == (TCP_FLAG_SYN | TCP_FLAG_ACK))
		c->seen |= NT_SEEN_SYNACK;
	else if ((v->tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) && (c->seen & NT_SEEN_SYNACK)) {
		nt_gate_end(c, &g->key);
		return NT_GATE_DROP;
	}
	/* An atomic fetch: two CPUs holding at once take two orders. */
	g->key.gid = c->gid;
	g->key.seq = __sync_fetch_and_add(&c->held, 1);
	g->key._pad = 0;
	if (g->key.seq >= NT_HELD_PER_CONN) {
		__sync_fetch_and_add(&c->missed, 1);
		return NT_GATE_DROP;
	}
	return NT_GATE_HOLD;
}

/* Holds a record built in value at g->key. Its connection may have changed
 * on another CPU since nt_gate took its order: shipping, it ships the
 * record unless the releaser did (nt_gate_release says how the two agree);
 * ended, it dropped what it held and counted this record with it. Gone
 * (evicted, or the tuple's next connection begun), it may have been
 * shipping: the record is dropped and counted missing, so that no finding
 * rests on what it lacks. */
static __noinline void nt_gate_hold(const struct nt_conn_view *v, struct nt_gate_scratch *g, struct nt_held *value)
{
	__u32 bit = 1u << g->key.seq; /* nt_gate holds orders below NT_HELD_PER_CONN only */
	struct nt_conn *c;

	if (bpf_map_update_elem(&held, &g->key, value, BPF_NOEXIST)) {
		nt_gate_count(NT_GATE_MISSING, 1);
		return;
	}
	nt_gate_count(NT_GATE_HELD, 1);
	c = nt_conn_lookup((v->keys & NT_VIEW_CT) ? &v->ct : &v->pkt, &g->root);
	if (!c || c->gid != g->key.gid) {
		bpf_map_delete_elem(&held, &g->key);
		nt_gate_count(NT_GATE_MISSING, 1);
		return;
	}
	/* Fetched, so a full barrier on every architecture (nt_gate_release).
	 * Set already: the tuple's next connection began since the gid was
	 * read and took this order, and holds its own record there; this one
	 * is counted missing and left to the LRU. */
	if (__sync_fetch_and_or(&c->stored, bit) & bit) {
		nt_gate_count(NT_GATE_MISSING, 1);
		return;
	}
	switch (*(volatile __u32 *)&c->state) {
	case NT_CONN_HOLDING:
		return;
	case NT_CONN_SHIPPING:
		if (__sync_fetch_and_or(&c->claimed, bit) & bit)
			return;
		nt_gate_ship(value);
		break;
	}
	bpf_map_delete_elem(&held, &g->key);
}

#endif /* NT_GATE */

#endif
