/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Building and submitting events: the per-CPU slots an event is built in,
 * packet identities, loss and shedding counters, the narrow record of an
 * IPv4 event, and the copy of the packet's first bytes.
 */
#ifndef NETTRACE_EVENT_H
#define NETTRACE_EVENT_H

#include "maps.h"
#include "parse.h"
#include "gate.h"

NT_SLOT_STACK(event, struct nt_event, event_slots, NT_EVENT_DEPTH)

/* Declares e, an event slot given back when e goes out of scope (NULL:
 * none free, the observation is not made). */
#define NT_EVENT(e) struct nt_event *e __attribute__((cleanup(nt_event_give))) = nt_event_take()

static __always_inline void nt_count_undelivered_n(__u32 key, __u64 count)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &key);

	if (n)
		*n += count;
}

static __always_inline void nt_count_undelivered(__u32 key)
{
	nt_count_undelivered_n(key, 1);
}

static __always_inline void nt_count_lost(__u8 point)
{
	nt_count_undelivered(point);
}

/* How full the ring buffer is, for shedding under overload. Its last
 * quarter is kept for evidence: a device hop or a route lookup (healthy
 * detail, more than half of a busy node's records) is shed, and counted,
 * once less than that is free, while NAT, encapsulation and TCP records
 * still fit. Its last eighth is kept for evidence of failure alone, as
 * each point judges it (nt_submit_as): a drop (nt_drop_failure), a
 * listener's refusal, a reset refusing a connection, a SYN-ACK
 * retransmitted, a connect given up, and the journey of the packet such a
 * failure is about (its NAT steps explain it). The fill level is read
 * without a lock, which is all a threshold needs. */
enum nt_ring_level {
	NT_RING_ROOM,
	NT_RING_DETAIL_SHED,
	NT_RING_FAILURES_ONLY,
};

static __always_inline enum nt_ring_level nt_ring_level(void)
{
	__u64 pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);

	if (pending * 8 >= size * 7)
		return NT_RING_FAILURES_ONLY;
	if (pending * 4 >= size * 3)
		return NT_RING_DETAIL_SHED;
	return NT_RING_ROOM;
}

/* Whether the kernel's drop reason r (enum skb_drop_reason, whose values
 * differ between kernels: CO-RE relocates each, and a reason the kernel
 * lacks matches nothing) is a TCP socket's ordinary handling of a segment
 * it has no use for: one arriving after the socket closed or reset, or
 * outside its window, one it held when it closed, or a free without a
 * reason. A busy node's healthy connections end with such drops: a client
 * closing without reading its reply makes two or three. */
#define NT_REASON(r, name)                                                           \
	(bpf_core_enum_value_exists(enum skb_drop_reason, SKB_DROP_REASON_##name) && \
	 (r) == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_##name))

static __always_inline bool nt_socket_drop(__u32 r)
{
	return NT_REASON(r, NOT_SPECIFIED) || NT_REASON(r, NO_SOCKET) || NT_REASON(r, SOCKET_CLOSE) ||
	       NT_REASON(r, QUEUE_PURGE) || NT_REASON(r, TCP_CLOSE) || NT_REASON(r, TCP_RESET) ||
	       NT_REASON(r, TCP_ABORT_ON_DATA) || NT_REASON(r, TCP_FLAGS) || NT_REASON(r, TCP_OLD_DATA) ||
	       NT_REASON(r, TCP_OLD_SEQUENCE) || NT_REASON(r, TCP_INVALID_SEQUENCE) || NT_REASON(r, TCP_OLD_ACK) ||
	       NT_REASON(r, TCP_TOO_OLD_ACK) || NT_REASON(r, TCP_ZEROWINDOW) || NT_REASON(r, TCP_OFOMERGE);
}

/* Whether a drop is evidence of failure: any but a TCP socket's ordinary
 * drop of a segment without SYN (a SYN's drop always is, and a packet of
 * another protocol nobody listens for gets no reset to tell of it). A
 * packet that made a conntrack entry never confirmed is its connection's
 * first, whatever the reason (a clash's loser freed by nf_reinject has
 * none). */
static __always_inline bool nt_drop_failure(const struct nt_event *e)
{
	return e->tuple.proto != IPPROTO_TCP || (e->tuple.tcp_flags & TCP_FLAG_SYN) ||
	       !nt_socket_drop(e->u.drop.reason) ||
	       ((e->flags & NT_F_CT) && e->ct.ctinfo == IP_CT_NEW && !(e->ct.status & IPS_CONFIRMED));
}

/* Whether an event is healthy detail: a device hop or a route lookup. */
static __always_inline bool nt_detail(__u8 point)
{
	return point == NT_POINT_DEV || point == NT_POINT_ROUTE;
}

/* Whether an event is shed, and counted per point, once the ring buffer
 * is at level from or fuller. */
static __always_inline bool nt_shed(const struct nt_event *e, enum nt_ring_level from)
{
	if (nt_ring_level() < from)
		return false;
	nt_count_undelivered(NT_SHED_KEY(e->point));
	return true;
}

/* Names the packet of an event: the time its skb address was first seen
 * since the last packet at that address was freed. */
static __always_inline void nt_identify(struct nt_event *e)
{
	__u64 *seen;

	if (!e->skb)
		return;
	seen = bpf_map_lookup_elem(&skb_ids, &e->skb);
	if (seen) {
		e->skb_seen = *seen;
		return;
	}
	e->skb_seen = e->ts;
	/* Two CPUs may see a new packet at once (a clone is another address,
	 * but a packet can be traced on two CPUs around a queue): the first
	 * insert wins and both events must carry it. */
	if (bpf_map_update_elem(&skb_ids, &e->skb, &e->skb_seen, BPF_NOEXIST)) {
		seen = bpf_map_lookup_elem(&skb_ids, &e->skb);
		if (seen)
			e->skb_seen = *seen;
	}
}

/* The packet at this address is gone: the next one is another packet.
 * Most packets were never reported, so never named: a lookup, which takes
 * no lock, before the delete, which does. */
static __always_inline void nt_forget_skb(__u64 skb)
{
	if (bpf_map_lookup_elem(&skb_ids, &skb))
		bpf_map_delete_elem(&skb_ids, &skb);
}

/* Whether an event holds an IPv6 address: it then goes out wide. The
 * payload's addresses have the tuple's family. */
static __always_inline bool nt_wide(const struct nt_event *e)
{
	return e->tuple.ipv6 || ((e->flags & NT_F_INNER) && e->inner.ipv6) ||
	       ((e->flags & NT_F_CT) && e->ct.orig.ipv6) ||
	       (e->point == NT_POINT_NAT && (e->flags & NT_F_PRE) && e->u.nat.pre.ipv6);
}

/* The narrowing copy of one member (the kinds are nettrace.h's): a record
 * is ring buffer memory, zeroed first so that no byte of it is stale, then
 * filled member by member. */
#define NT_COPY_MEMBER(kind, type, name) NT_COPY_##kind(type, name)
#define NT_COPY_VAL(type, name) n->name = w->name;
#define NT_COPY_ZERO(type, name)
#define NT_COPY_ADDR(type, name) n->name = w->name[0];
#define NT_COPY_IFNAME(type, name) __builtin_memcpy(n->name, w->name, sizeof(n->name));
#define NT_COPY_STRUCT(type, name) nt_narrow_##type(&n->name, &w->name);
#define NT_COPY_PAYLOAD(type, name) nt_narrow_##type(&n->name, &w->name, w->point);

/* nt_narrow_<type>: writes the narrow form of a struct nettrace.h declares
 * from its wide one, into memory already zeroed. */
#define NT_NARROWING(type)                                                     \
	static __always_inline void nt_narrow_##type(struct type##4 *n, const struct type *w) \
	{                                                                       \
		NT_FIELDS_##type(NT_COPY_MEMBER)                                \
	}

NT_NARROWING(nt_tuple)
NT_NARROWING(nt_conntrack)
#define NT_PAYLOAD_NARROWING(point, member) NT_NARROWING(nt_##member)
NT_PAYLOADS(NT_PAYLOAD_NARROWING)

/* The payload of the event's point (a dev event has none). */
#define NT_COPY_PAYLOAD_OF(point, member)                                      \
	case NT_POINT_##point:                                                  \
		nt_narrow_nt_##member(&n->member, &w->member);                  \
		break;
static __always_inline void nt_narrow_nt_payload(union nt_payload4 *n, const union nt_payload *w, __u8 point)
{
	switch (point) {
		NT_PAYLOADS(NT_COPY_PAYLOAD_OF)
	}
}

NT_NARROWING(nt_event)

/* Writes an IPv4 event as its narrow record. */
static __always_inline void nt_narrow(struct nt_event4 *n, const struct nt_event *e)
{
	__builtin_memset(n, 0, sizeof(*n));
	nt_narrow_nt_event(n, e);
}

/* Stamps an event as it is submitted: time, identity, CPU and, for an
 * event with an IPv6 address, its wide form. */
static __always_inline bool nt_stamp(struct nt_event *e)
{
	bool wide = nt_wide(e);

	e->ts = bpf_ktime_get_ns();
	nt_identify(e);
	e->cpu = bpf_get_smp_processor_id();
	if (wide)
		e->flags |= NT_F_WIDE;
	return wide;
}

/* Whether submitting a record of len bytes (already reserved) wakes the
 * reader: only when the records waiting cross a multiple of a sixteenth of
 * the ring, never merely because the reader had caught up. A wakeup runs
 * in the submitting program (an interrupt and a scheduler call): on a
 * quiet ring every record finds the reader caught up, and the first
 * record of most connections (a TCP state change, in the connecting
 * process) took 4 us a run with its wakeup against 0.8 without
 * (scripts/bench/probe-cost.sh). The reader reads on its own clock as well
 * (its tick), so a quiet ring's records wait at most that long; a crossing
 * two CPUs miss by reserving at once is caught at the next multiple. The
 * ring's size is a power of two, so a multiple is crossed exactly when
 * the count's bits above the sixteenth change. */
static __always_inline __u64 nt_wakeup_crossing(__u64 before, __u64 after)
{
	__u64 mark = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 16;

	if ((before ^ after) >= mark)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

static __always_inline __u64 nt_wakeup(__u64 len)
{
	__u64 pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	if (pending < len)
		return BPF_RB_NO_WAKEUP;
	return nt_wakeup_crossing(pending - len, pending);
}

/* nt_wakeup for a record not yet in the ring (bpf_ringbuf_output). */
static __always_inline __u64 nt_wakeup_output(__u64 len)
{
	__u64 pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	return nt_wakeup_crossing(pending, pending + len);
}

/* Copies the first bytes of a packet from its IP header (the linear part
 * only, at most snap_len) to dst, and returns how many. */
static __always_inline __u16 nt_copy_packet(void *dst, struct sk_buff *skb, bool use_data, bool direct)
{
	unsigned char *head = NT_RD(direct, skb, head);
	__u32 off = nt_l3_offset(skb, head, use_data, direct);
	__u32 tail = NT_RD(direct, skb, tail);
	__u32 caplen = 0;

	if (tail > off)
		caplen = tail - off;
	if (caplen > snap_len)
		caplen = snap_len;
	/* Bound again for the verifier, which loses the range through the
	 * comparison with a 32-bit load. */
	caplen &= 2 * NT_SNAP_MAX - 1;
	if (caplen > NT_SNAP_MAX)
		caplen = NT_SNAP_MAX;
	if (caplen > snap_len || bpf_probe_read_kernel(dst, caplen, head + off))
		return 0;
	return caplen;
}

/* Packet journeys (struct nt_journey): where the hops start, after the
 * packet's snap_len bytes padded to 8 (a constant: Linux 6.1's verifier
 * loses the bound of a length read from the journey, caplen, through the
 * sums below, and refuses the output), and the room they may take. */
#define NT_HOPS_AT ((snap_len + 7) & ~7U)
#define NT_HOPS_ROOM (NT_SNAP_MAX + NT_JOURNEY_HOPS * sizeof(struct nt_event4))

/* Whether a point's events are journeys' steps: the steps of a packet's
 * way (devices, NAT hooks, route lookups, encapsulation), which start
 * journeys and share their packet's bytes. A TCP event (a socket's state,
 * a reset; no packet bytes of its own) joins the journey pending on its
 * CPU as a step without packet (nt_journey_take); drops and listener
 * outcomes of failure end it and go out on their own. */
static __always_inline bool nt_journeys_point(__u8 point)
{
	return point == NT_POINT_DEV || point == NT_POINT_NAT || point == NT_POINT_ROUTE ||
	       point == NT_POINT_VXLAN;
}

/* Whether a point's events that are no failure join the journey pending
 * on their CPU as steps without packet. A SYN the listener queued joins
 * too: it is reported once its SYN-ACK went out on the same CPU, and on
 * its own it cost the connection two records, its own and the SYN-ACK's
 * journey cut in two. Its packet's bytes are the SYN's, which its steps
 * to the listener already carry. */
static __always_inline bool nt_joins_as_hop(__u8 point)
{
	return point == NT_POINT_TCP || point == NT_POINT_SYN;
}

static __always_inline void nt_journey_count(struct nt_journey *j, __u32 shed_key)
{
#pragma unroll
	for (__u32 p = 0; p < NT_POINT_MAX; p++)
		if (j->events[p])
			nt_count_undelivered_n(p + shed_key, j->events[p]);
}

/* How many of a journey's events are healthy detail (nt_detail). */
static __always_inline __u32 nt_journey_detail(const struct nt_journey *j)
{
	__u32 n = 0;

#pragma unroll
	for (__u32 p = 0; p < NT_POINT_MAX; p++)
		if (nt_detail(p))
			n += j->events[p];
	return n;
}

/* Whether the gate keeps a journey of len bytes from the ring buffer: held
 * while its connection looks healthy, or dropped once it ended normally.
 * Held from the journey itself (held_len, head and tail are a struct
 * nt_held). */
static __always_inline bool nt_journey_gated(struct nt_journey *j, __u64 len)
{
#ifndef NT_GATE
	return false;
#else
	NT_GATE_SCRATCH(g);

	if (!nt_gate_on() || !g)
		return false;
	switch (nt_gate(&j->conn, g, false)) {
	case NT_GATE_HOLD:
		j->held_len = len;
		nt_gate_hold(&j->conn, g, (struct nt_held *)&j->held_len);
		return true;
	case NT_GATE_DROP:
		return true;
	default:
		return false;
	}
#endif
}

/* Sends this CPU's pending journey as one record. Under overload a
 * journey of device hops and route lookups only is shed, one holding
 * anything else goes out whole (its later device hops were shed as they
 * came, nt_journey_take); in the ring's last eighth every journey is shed
 * but that of failed, the packet of the failure being reported (0: none).
 * Counted per point, as events. The caller has marked it busy
 * (nt_journey_take, nt_journey_send_unnested). */
static __always_inline void nt_journey_send(struct nt_journey *j, __u64 failed)
{
	__u64 at = NT_HOPS_AT + j->hops * sizeof(struct nt_event4);
	__u64 len = snap_len;
	enum nt_ring_level level;
	struct nt_hops_tail *tail;

	if (!j->pending)
		return;
	j->pending = 0;
	/* The bounds are for the verifier, which cannot see snap_len <=
	 * NT_SNAP_MAX and hops <= NT_JOURNEY_HOPS through the sums. */
	if (j->hops) {
		if (at > NT_HOPS_ROOM)
			return;
		tail = (void *)j->tail + at;
		tail->count = j->hops;
		tail->_pad = 0;
		j->head.flags |= NT_F_HOPS;
		len = at + sizeof(*tail);
	}
	if (len > sizeof(j->tail))
		return;
	len += sizeof(struct nt_event4);
	if (nt_journey_gated(j, len))
		return;
	level = nt_ring_level();
	if ((level == NT_RING_FAILURES_ONLY && (!failed || j->head.skb != failed)) ||
	    (level == NT_RING_DETAIL_SHED && nt_journey_detail(j) == j->hops + 1)) {
		nt_journey_count(j, NT_POINT_MAX);
		return;
	}
	if (bpf_ringbuf_output(&events, &j->head, len, nt_wakeup_output(len)))
		nt_journey_count(j, 0);
}

static __always_inline struct nt_journey *nt_journey(void)
{
	__u32 key = 0;

	return bpf_map_lookup_elem(&journeys, &key);
}

/* Sends the pending journey from a program that is not changing it: marked
 * busy meanwhile, as nt_journey_take marks it. Sending is a change too: a
 * program nested on this CPU while the journey goes out (a softirq's
 * inside a process's, as a socket's state change or a received packet's
 * free runs) would otherwise find nothing pending and start its own
 * journey in the same memory, and the gate would hold that journey's
 * record, or look its connection up by that journey's view, in place of
 * the one being sent (the held record then lost, or counted missing). */
static __always_inline void nt_journey_send_unnested(struct nt_journey *j, __u64 failed)
{
	*(volatile __u8 *)&j->busy = 1;
	asm volatile("" ::: "memory");
	nt_journey_send(j, failed);
	asm volatile("" ::: "memory");
	*(volatile __u8 *)&j->busy = 0;
}

/* Sends this CPU's pending journey before another record, so that each
 * CPU's records stay in the order they were made. Not from a program
 * nested inside one changing it (busy): that one sends it. */
static __always_inline void nt_journey_flush(__u64 failed)
{
	struct nt_journey *j = nt_journey();

	if (j && j->pending && !j->busy)
		nt_journey_send_unnested(j, failed);
}

/* The packet at this address is freed: its journey is complete. */
static __always_inline void nt_journey_end(__u64 skb)
{
	struct nt_journey *j = nt_journey();

	if (j && j->pending && !j->busy && j->head.skb == skb)
		nt_journey_send_unnested(j, 0);
}

/* Whether tuple b is tuple a, or the same TCP or UDP packet's with its
 * addresses and ports translated (NAT). Both are two words. */
static __always_inline bool nt_tuple_same_or_translated(const __u64 *a, const __u64 *b)
{
	const struct nt_tuple4 *ta = (const void *)a, *tb = (const void *)b;

	if (a[0] == b[0] && a[1] == b[1])
		return true;
	return (ta->proto == IPPROTO_TCP || ta->proto == IPPROTO_UDP) && ta->proto == tb->proto &&
	       ta->tcp_flags == tb->tcp_flags;
}

/* Whether the event in next is a step of the head's packet: the same skb
 * and identity, and either the same inner tuple and the same or a
 * translated tuple, or, decapsulated, no inner tuple and the head's inner
 * one, the same or translated. User space derives a translated step's
 * packet bytes from the record's, as the kernel's NAT rewrites them, and a
 * decapsulated step's from the inner packet in the record's bytes; an
 * encapsulated packet, whose outer headers it cannot derive, starts a
 * journey of its own (nt_narrow zeroes what a record does not hold, so
 * whole words compare). */
static __always_inline bool nt_journey_same(const struct nt_journey *j)
{
	const __u64 *a = (const void *)&j->head.tuple;
	const __u64 *b = (const void *)&j->next.tuple;

	_Static_assert(__builtin_offsetof(struct nt_event4, ct) - __builtin_offsetof(struct nt_event4, tuple) == 32,
		       "tuple and inner are four words");
	_Static_assert(sizeof(struct nt_tuple4) == 16, "a tuple is two words");
	if (j->head.skb != j->next.skb || j->head.skb_seen != j->next.skb_seen)
		return false;
	if (a[2] == b[2] && a[3] == b[3])
		return (!(a[2] | a[3]) || (a[0] == b[0] && a[1] == b[1])) && nt_tuple_same_or_translated(a, b);
	return (a[2] | a[3]) && !(b[2] | b[3]) && nt_tuple_same_or_translated(a + 2, b);
}

/* Adds the event in next to the pending journey as its next hop. */
static __always_inline bool nt_journey_add(struct nt_journey *j)
{
	__u64 at = NT_HOPS_AT + j->hops * sizeof(struct nt_event4);

	/* The bound on at is for the verifier, as in nt_journey_send. */
	if (j->hops >= NT_JOURNEY_HOPS || at > NT_HOPS_ROOM - sizeof(struct nt_event4))
		return false;
	__builtin_memcpy((void *)j->tail + at, &j->next, sizeof(struct nt_event4));
	j->hops++;
	return true;
}

/* Starts a journey with the event in next, after sending the pending one. */
static __always_inline void nt_journey_start(struct nt_journey *j, struct sk_buff *skb, bool use_data,
					     bool direct)
{
	nt_journey_send(j, 0);
	j->head = j->next;
	j->head.caplen = 0;
	if (skb && snap_len > 0 && snap_len <= NT_SNAP_MAX)
		j->head.caplen = nt_copy_packet(j->tail, skb, use_data, direct);
	j->hops = 0;
	__builtin_memset(j->events, 0, sizeof(j->events));
	j->pending = 1;
}

/* Takes an event into this CPU's journey: as the pending one's next hop,
 * or as a new journey (with its packet's bytes when skb is given). Returns
 * false when the event goes out on its own: its point ends journeys, a
 * step has no packet, it has an IPv6 address (its wide record has no
 * journey), a TCP or SYN event finds no journey with room, or a program
 * on this CPU is changing the journey. */
static __always_inline bool nt_journey_take(struct nt_event *e, struct sk_buff *skb, bool use_data, bool direct)
{
	bool step = nt_journeys_point(e->point), joined = true, started = false;
	struct nt_journey *j;

	if (nt_wide(e) || (step ? !e->skb : !nt_joins_as_hop(e->point)))
		return false;
	/* Under overload a device hop or route lookup joins no journey: shed
	 * (and counted) as it would be on its own, so that the journeys of
	 * evidence (NAT, encapsulation) keep the ring buffer's last quarter.
	 * Other steps join: their journey is judged as it goes out. */
	if (step && nt_detail(e->point) && nt_shed(e, NT_RING_DETAIL_SHED))
		return true;
	j = nt_journey();
	if (!j || j->busy)
		return false;
	/* A TCP or SYN event only joins a pending journey with room: it
	 * starts none (a journey is a packet's), and one that does not join is
	 * stamped for its own record. */
	if (!step && (!j->pending || j->hops >= NT_JOURNEY_HOPS))
		return false;
	/* A volatile store and a compiler barrier: the flag must be in memory
	 * before the journey changes, for a program interrupting this one on
	 * this CPU to see it. (A program preempted here, on a preemptible
	 * kernel, is to the next one on this CPU as an interrupted one; the
	 * window between the test and the store is two instructions.) */
	*(volatile __u8 *)&j->busy = 1;
	asm volatile("" ::: "memory");
	nt_stamp(e);
	nt_narrow(&j->next, e);
	/* A step with its packet at hand does not join a journey that has no
	 * bytes (the one the tunnel's encapsulation begins, before the outer
	 * headers exist): it starts one with them, so that the steps after it,
	 * the underlay's transmission among them, name the packet on the wire. */
	if (!step)
		joined = nt_journey_add(j); /* true: its room was checked */
	else if (!j->pending || !nt_journey_same(j) || (skb && !j->head.caplen && snap_len > 0) || !nt_journey_add(j)) {
		nt_journey_start(j, skb, use_data, direct);
		started = true;
	}
	(void)started; /* read by the gate only (NT_GATE) */
#ifdef NT_GATE
	if (joined && nt_gate_on()) {
		nt_conn_view_add(&j->conn, e, started);
		if (started)
			nt_conn_view_packet(&j->conn, e, skb, use_data, direct);
	}
#endif
	if (!joined)
		nt_count_lost(e->point);
	else if (e->point < NT_POINT_MAX)
		j->events[e->point & (NT_POINT_MAX - 1)]++;
	asm volatile("" ::: "memory");
	*(volatile __u8 *)&j->busy = 0;
	return true;
}

/* Whether the event needs no record of its own: taken into this CPU's
 * journey, or shed. Otherwise the journey pending goes out first, kept in
 * the ring's last eighth when it is the packet of this failure. Evidence
 * of failure is never shed, and joins no journey, which may be. (A device
 * hop in a program nested inside a journey's change is checked for
 * shedding twice.) */
static __always_inline bool nt_no_record(struct nt_event *e, bool failure, struct sk_buff *skb, bool use_data,
					 bool direct)
{
	if (!failure && nt_journey_take(e, skb, use_data, direct))
		return true;
	nt_journey_flush(failure ? e->skb : 0);
	if (failure)
		return false;
	return nt_shed(e, nt_detail(e->point) ? NT_RING_DETAIL_SHED : NT_RING_FAILURES_ONLY);
}

/* Whether the gate keeps an event that goes out on its own from the ring
 * buffer: held (built in held_scratch: its packet's bytes when skb is
 * given) while its connection looks healthy, or dropped once it ended
 * normally. A failure ships, and first what its connection held. An event
 * with an IPv6 address is not gated. */
static __always_inline bool nt_gated(struct nt_event *e, bool failure, struct sk_buff *skb, bool use_data,
				     bool direct)
{
#ifndef NT_GATE
	return false;
#else
	NT_GATE_SCRATCH(g);
	struct nt_held *h;
	__u32 zero = 0;

	if (!nt_gate_on() || !g || nt_wide(e))
		return false;
	/* Stamped first: the view compares the packet's identity with its
	 * connection's first SYN's. */
	nt_stamp(e);
	nt_conn_view_add(&g->view, e, true);
	nt_conn_view_packet(&g->view, e, skb, use_data, direct);
	switch (nt_gate(&g->view, g, failure)) {
	case NT_GATE_DROP:
		return true;
	case NT_GATE_SHIP:
		return false;
	default:
		break;
	}
	h = bpf_map_lookup_elem(&held_scratch, &zero);
	/* A program nested on this CPU while this one builds: it ships its
	 * event, and its connection finds this slot of its held missing if it
	 * ever ships. */
	if (!h || h->busy)
		return false;
	*(volatile __u32 *)&h->busy = 1;
	asm volatile("" ::: "memory");
	e->caplen = 0;
	h->len = sizeof(struct nt_event4);
	if (skb && snap_len > 0 && snap_len <= NT_SNAP_MAX) {
		e->caplen = nt_copy_packet(h->rec + sizeof(struct nt_event4), skb, use_data, direct);
		h->len += snap_len;
	}
	nt_narrow((struct nt_event4 *)h->rec, e);
	nt_gate_hold(&g->view, g, h);
	asm volatile("" ::: "memory");
	*(volatile __u32 *)&h->busy = 0;
	return true;
#endif
}

/* Submits an event, evidence of failure or not as its point judges. The
 * judgement is a constant at most call sites (nt_submit): the verifier
 * then walks one of the paths that depend on it, not both. */
static __always_inline void nt_submit_as(struct nt_event *e, bool failure)
{
	struct nt_event4 *n;
	struct nt_event *rec;

	if (nt_no_record(e, failure, NULL, false, false) || nt_gated(e, failure, NULL, false, false))
		return;
	if (nt_stamp(e)) {
		rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
		if (!rec) {
			nt_count_lost(e->point);
			return;
		}
		/* A typed copy, as in nt_submit_skb. */
		*rec = *e;
		bpf_ringbuf_submit(rec, nt_wakeup(sizeof(*rec)));
		return;
	}
	n = bpf_ringbuf_reserve(&events, sizeof(*n), 0);
	if (!n) {
		nt_count_lost(e->point);
		return;
	}
	nt_narrow(n, e);
	bpf_ringbuf_submit(n, nt_wakeup(sizeof(*n)));
}

static __always_inline void nt_submit(struct nt_event *e)
{
	nt_submit_as(e, false);
}

/* Submits an event followed by the first bytes of its packet from the IP
 * header. A record's size must be a constant for bpf_ringbuf_reserve:
 * snap_len is read-only data, which the verifier treats as a known scalar,
 * and each form has its own reserve. */
static __always_inline void nt_submit_skb_as(struct nt_event *e, struct sk_buff *skb, bool use_data,
					     bool direct, bool failure)
{
	struct nt_event4 *n;
	struct nt_event *rec;

	if (snap_len == 0 || snap_len > NT_SNAP_MAX || !skb) {
		nt_submit_as(e, failure);
		return;
	}
	if (nt_no_record(e, failure, skb, use_data, direct) || nt_gated(e, failure, skb, use_data, direct))
		return;
	if (nt_wide(e)) {
		rec = bpf_ringbuf_reserve(&events, sizeof(*e) + snap_len, 0);
		if (!rec) {
			nt_count_lost(e->point);
			return;
		}
		e->caplen = nt_copy_packet(rec + 1, skb, use_data, direct);
		nt_stamp(e);
		/* A typed copy: the record is 8-byte aligned, so the words
		 * holding kernel addresses are stored whole. A byte-wise memcpy
		 * would shift them, which the verifier forbids for pointer
		 * values. */
		*rec = *e;
		bpf_ringbuf_submit(rec, nt_wakeup(sizeof(*e) + snap_len));
		return;
	}
	n = bpf_ringbuf_reserve(&events, sizeof(*n) + snap_len, 0);
	if (!n) {
		nt_count_lost(e->point);
		return;
	}
	e->caplen = nt_copy_packet(n + 1, skb, use_data, direct);
	nt_stamp(e);
	nt_narrow(n, e);
	bpf_ringbuf_submit(n, nt_wakeup(sizeof(*n) + snap_len));
}

static __always_inline void nt_submit_skb(struct nt_event *e, struct sk_buff *skb, bool use_data, bool direct)
{
	nt_submit_skb_as(e, skb, use_data, direct, false);
}

/* Clears what deciding whether to report a packet reads and writes: its
 * tuples, flags and namespace. The points that see every packet decide
 * before they clear the rest (nt_init_rest): most packets are not reported,
 * and clearing a whole event cost more than the decision. */
static __always_inline void nt_init_decision(struct nt_event *e)
{
	_Static_assert(__builtin_offsetof(struct nt_event, inner) ==
			       __builtin_offsetof(struct nt_event, tuple) + sizeof(struct nt_tuple),
		       "inner follows tuple");
	__builtin_memset(&e->tuple, 0, 2 * sizeof(struct nt_tuple));
	e->flags = 0;
	e->netns = 0;
}

/* Clears all but what nt_init_decision cleared, and says what the event is. */
static __always_inline void nt_init_rest(struct nt_event *e, __u8 point, __u8 kind, __u64 skb)
{
	__u32 netns = e->netns;
	__u8 flags = e->flags;

	__builtin_memset(e, 0, __builtin_offsetof(struct nt_event, tuple));
	__builtin_memset(&e->ct, 0, sizeof(*e) - __builtin_offsetof(struct nt_event, ct));
	e->netns = netns;
	e->flags = flags;
	e->point = point;
	e->kind = kind;
	e->hook = NT_HOOK_NONE;
	e->skb = skb;
}

static __always_inline void nt_init(struct nt_event *e, __u8 point, __u8 kind, __u64 skb)
{
	nt_init_decision(e);
	nt_init_rest(e, point, kind, skb);
}

#endif
