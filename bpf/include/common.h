/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Helpers shared by every observation point: the maps all objects share
 * (the Go loader creates them once and hands them to each object), packet
 * parsing, conntrack reading, the in-kernel filter and event submission.
 */
#ifndef NETTRACE_COMMON_H
#define NETTRACE_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "nettrace.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_HLEN 14
#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ICMPV6 58
#define NT_AF_INET6 10
#define NF_ACCEPT 1
#define NT_HOOKS 5
#define NF_INET_LOCAL_OUT 3
#define NT_NO_HEADER 0xffff
#define IP_OFFSET_MASK 0x1fff
#define VXLAN_HLEN 8
#define UDP_HLEN 8
#define PACKET_BROADCAST 1
#define PACKET_MULTICAST 2

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Reads a field of a kernel object. direct is a constant at every call
 * site: tp_btf, fentry and netfilter programs get BTF pointers, which the
 * verifier lets them load from directly (a few ns); kprobe and classic
 * tracepoint programs get plain addresses and must use
 * bpf_probe_read_kernel (tens of ns per call). The branch not taken is
 * compiled out, so the verifier only sees the right one. */
#define NT_RD(direct, p, f) ((direct) ? (p)->f : BPF_CORE_READ(p, f))

/* Typed loads from any kernel address (Linux 6.2+): through the pointer it
 * returns, each field read is one load instruction the JIT guards with an
 * exception-table entry (a fault reads 0), where bpf_probe_read_kernel is a
 * helper call per read. Every packet of every program reads its headers,
 * so this is most of what a packet that matches nothing costs. Weak: on a
 * kernel without it the address is 0, the verifier prunes the branch that
 * calls it, and probe reads are used. */
extern void *bpf_rdonly_cast(const void *obj__ign, __u32 btf_id__k) __ksym __weak;

#define NT_CAST(type, p) ((const type *)bpf_rdonly_cast((p), bpf_core_type_id_kernel(type)))

/* Set by the loader before load; the verifier sees them as constants, so an
 * empty filter costs one branch. */
volatile const __u32 filter_len = 0;
volatile const struct nt_filter_insn filter_prog[NT_FILTER_MAX] = {};
volatile const __u32 netns_filter = 0; /* 1: only namespaces in watched_netns */
volatile const __u32 snap_len = 128; /* <= NT_SNAP_MAX */
volatile const __u32 all_packets = 0; /* 1: report established data too */
volatile const __u16 vxlan_port_a = 4789;
volatile const __u16 vxlan_port_b = 8472;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} events SEC(".maps");

/* Records that did not fit in the ring buffer, per point, then (from
 * NT_SHED_KEY) the records shed to keep room for evidence, per point. */
#define NT_SHED_KEY(point) ((point) + NT_POINT_MAX)
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * NT_POINT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Packets (by skb address) and conntrack entries that matched the filter
 * once: they are followed after NAT or encapsulation changes their tuple.
 * The kernel recycles both addresses, and frees some packets without a
 * tracepoint (a pure ACK TCP consumed, a GRO-merged segment), so each
 * entry keeps what the followed object was: a packet its last tuple and
 * conntrack entry, an entry its original tuple. An address found holding
 * something else is another object, not followed. */
struct followed_skb {
	struct nt_tuple tuple; /* flags cleared */
	__u64 ct;
	__u8 mark; /* NT_FOLLOWED_SKB or NT_QUIET_SKB */
	__u8 _pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct followed_skb);
} tracked_skb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct nt_tuple); /* the entry's original tuple */
} tracked_ct SEC(".maps");

/* Tuples (both directions, flags cleared) of the followed conntrack entries,
 * so that a reply is followed where no conntrack entry exists (a pod's
 * namespace without NAT rules). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct nt_tuple);
	__type(value, __u8);
} tracked_tuple SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} watched_netns SEC(".maps");

/* The packet between the two halves of a NAT observation on this CPU, per
 * netfilter hook: "before" fills it, "after" completes it. Per hook because
 * a softirq may run PREROUTING in the middle of a process's OUTPUT. A
 * softirq running the same hook inside a process's (a forwarded packet's
 * POSTROUTING inside a local one's) overwrites the slot; the slot names its
 * skb, so the interrupted packet's "after" then lacks its pre-NAT tuple
 * rather than taking another packet's. A per-CPU array, not a hash keyed by
 * skb: this runs eight times per packet in every watched namespace. The
 * route point reads the OUTPUT slot to attribute the re-route lookup that
 * NAT triggers between the two halves. */
struct nat_slot {
	__u64 skb;
	struct nt_tuple pre;
	__u8 active;
	__u8 followed;
	__u8 _pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NT_HOOKS);
	__type(key, __u32);
	__type(value, struct nat_slot);
} nat_slots SEC(".maps");

/* Packet identities: skb address -> the time it was first seen holding the
 * packet. Forgotten when the packet is freed or consumed (drop point), so
 * the next packet at that address gets a new identity. LRU: a packet whose
 * free was missed (freed through a path without a tracepoint) is evicted
 * eventually, and user space still tells a recycled address by its
 * contradicting path. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} skb_ids SEC(".maps");

/* The last SYN-ACKs this CPU sent, written at the OUTPUT hook. A listener
 * answers a SYN inside tcp_conn_request, before the SYN is consumed on the
 * same CPU: the syn point's tracepoint method looks for its answer there to
 * tell a queued SYN from a dropped one. Several, not one: a softirq may
 * answer another SYN between a process-context answer and its consume. */
#define NT_SYNACK_SLOTS 4

struct synack_slot {
	__u64 ts; /* 0: free, or taken by the SYN it answered */
	__u64 req; /* the request socket, 0 for a syncookie SYN-ACK */
	struct nt_tuple tuple;
	__u32 ack; /* the SYN-ACK's acknowledgment number: its SYN's sequence + 1 */
	__u32 _pad;
};

struct synack_ring {
	__u32 next;
	__u32 _pad;
	struct synack_slot slots[NT_SYNACK_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct synack_ring);
} synack_slots SEC(".maps");

/* Listening sockets by namespace and port, learnt from the request sockets
 * of the SYN-ACKs they send, so that a SYN they drop later can be reported
 * with their queues. Values are plain addresses: read with probe reads and
 * checked (state, port) before use, as the socket may be gone. */
struct listener_key {
	__u32 netns;
	__u16 port;
	__u16 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct listener_key);
	__type(value, __u64);
} listeners SEC(".maps");

/* Events are built in a per-CPU slot, not on the stack: with addresses of
 * either family an event takes most of the 512-byte BPF stack. Programs
 * nest on one CPU (a softirq's inside a process's, an NMI's inside any):
 * each takes the next slot and gives it back before the one it
 * interrupted resumes. */
#define NT_EVENT_DEPTH 4

struct nt_event_slots {
	__u32 depth;
	__u32 _pad;
	struct nt_event ev[NT_EVENT_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_event_slots);
} event_slots SEC(".maps");

static __always_inline struct nt_event *nt_event_take(void)
{
	__u32 key = 0;
	struct nt_event_slots *s = bpf_map_lookup_elem(&event_slots, &key);
	__u32 d;

	if (!s)
		return NULL;
	d = s->depth;
	if (d >= NT_EVENT_DEPTH)
		return NULL;
	s->depth = d + 1;
	return &s->ev[d & (NT_EVENT_DEPTH - 1)];
}

static __always_inline void nt_event_give(struct nt_event **e)
{
	__u32 key = 0;
	struct nt_event_slots *s;

	if (!*e)
		return;
	s = bpf_map_lookup_elem(&event_slots, &key);
	if (s && s->depth)
		s->depth--;
}

/* Declares e, an event slot given back when e goes out of scope (NULL:
 * none free, the observation is not made). */
#define NT_EVENT(e) struct nt_event *e __attribute__((cleanup(nt_event_give))) = nt_event_take()

/* Slot 0 is set to 1 the first time anything is tracked, so that until then
 * the tracked maps are not even looked up. A map, not a global: globals live
 * in each object's own .bss, and this flag must be shared by all of them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tracking SEC(".maps");

static __always_inline bool nt_tracking_active(void)
{
	__u32 key = 0;
	__u32 *on = bpf_map_lookup_elem(&tracking, &key);

	return on && *on;
}

static __always_inline void nt_count_undelivered(__u32 key)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &key);

	if (n)
		*n += 1;
}

static __always_inline void nt_count_lost(__u8 point)
{
	nt_count_undelivered(point);
}

/* Under overload the ring buffer keeps its last quarter for evidence of
 * failure: a device hop or a route lookup (healthy detail, more than half
 * of a busy node's records) is shed, and counted, once less than that is
 * free, while drops, NAT, encapsulation, listener and TCP records still
 * fit. The fill level is read without a lock, which is all a threshold
 * needs. */
static __always_inline bool nt_shed(const struct nt_event *e)
{
	__u64 pending, size;

	if (e->point != NT_POINT_DEV && e->point != NT_POINT_ROUTE)
		return false;
	pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);
	if (pending * 4 < size * 3)
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

static __always_inline void nt_narrow_tuple(struct nt_tuple4 *n, const struct nt_tuple *t)
{
	n->saddr = t->saddr[0];
	n->daddr = t->daddr[0];
	n->sport = t->sport;
	n->dport = t->dport;
	n->proto = t->proto;
	n->tcp_flags = t->tcp_flags;
}

/* Writes an IPv4 event as its narrow record. Field by field: the record is
 * ring buffer memory, zeroed first so that no byte of it is stale. */
static __always_inline void nt_narrow(struct nt_event4 *n, const struct nt_event *e)
{
	__builtin_memset(n, 0, sizeof(*n));
	n->ts = e->ts;
	n->skb = e->skb;
	n->netns = e->netns;
	n->ifindex = e->ifindex;
	n->point = e->point;
	n->kind = e->kind;
	n->hook = e->hook;
	n->flags = e->flags;
	n->cpu = e->cpu;
	n->caplen = e->caplen;
	__builtin_memcpy(n->ifname, e->ifname, sizeof(n->ifname));
	nt_narrow_tuple(&n->tuple, &e->tuple);
	nt_narrow_tuple(&n->inner, &e->inner);
	n->ct.id = e->ct.id;
	n->ct.status = e->ct.status;
	n->ct.mark = e->ct.mark;
	n->ct.zone = e->ct.zone;
	n->ct.ctinfo = e->ct.ctinfo;
	nt_narrow_tuple(&n->ct.orig, &e->ct.orig);
	nt_narrow_tuple(&n->ct.reply, &e->ct.reply);
	switch (e->point) {
	case NT_POINT_NAT:
		nt_narrow_tuple(&n->u.nat.pre, &e->u.nat.pre);
		n->u.nat.out_ifindex = e->u.nat.out_ifindex;
		__builtin_memcpy(n->u.nat.out_ifname, e->u.nat.out_ifname, sizeof(n->u.nat.out_ifname));
		break;
	case NT_POINT_ROUTE:
		n->u.route.oif = e->u.route.oif;
		n->u.route.gateway = e->u.route.gateway[0];
		n->u.route.saddr = e->u.route.saddr[0];
		n->u.route.err = e->u.route.err;
		n->u.route.table = e->u.route.table;
		__builtin_memcpy(n->u.route.oifname, e->u.route.oifname, sizeof(n->u.route.oifname));
		break;
	case NT_POINT_VXLAN:
		n->u.vxlan.vni = e->u.vxlan.vni;
		n->u.vxlan.remote = e->u.vxlan.remote[0];
		n->u.vxlan.local = e->u.vxlan.local[0];
		n->u.vxlan.port = e->u.vxlan.port;
		break;
	case NT_POINT_SYN:
		n->u.syn.laddr = e->u.syn.laddr[0];
		n->u.syn.lport = e->u.syn.lport;
		n->u.syn.outcome = e->u.syn.outcome;
		n->u.syn.accept_qlen = e->u.syn.accept_qlen;
		n->u.syn.accept_max = e->u.syn.accept_max;
		n->u.syn.syn_qlen = e->u.syn.syn_qlen;
		n->u.syn.listen_overflows = e->u.syn.listen_overflows;
		n->u.syn.listen_drops = e->u.syn.listen_drops;
		break;
	case NT_POINT_DROP:
		n->u.drop = e->u.drop;
		break;
	case NT_POINT_TCP:
		n->u.tcp = e->u.tcp;
		break;
	}
	n->skb_seen = e->skb_seen;
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

static __always_inline void nt_submit(struct nt_event *e)
{
	struct nt_event4 *n;

	if (nt_shed(e))
		return;
	if (nt_stamp(e)) {
		if (bpf_ringbuf_output(&events, e, sizeof(*e), 0))
			nt_count_lost(e->point);
		return;
	}
	n = bpf_ringbuf_reserve(&events, sizeof(*n), 0);
	if (!n) {
		nt_count_lost(e->point);
		return;
	}
	nt_narrow(n, e);
	bpf_ringbuf_submit(n, 0);
}

static __always_inline __u32 nt_l3_offset(struct sk_buff *skb, unsigned char *head, bool use_data,
					   bool direct);

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

/* Submits an event followed by the first bytes of its packet from the IP
 * header. A record's size must be a constant for bpf_ringbuf_reserve:
 * snap_len is read-only data, which the verifier treats as a known scalar,
 * and each form has its own reserve. */
static __always_inline void nt_submit_skb(struct nt_event *e, struct sk_buff *skb, bool use_data,
					  bool direct)
{
	struct nt_event4 *n;
	struct nt_event *rec;

	if (snap_len == 0 || snap_len > NT_SNAP_MAX || !skb) {
		nt_submit(e);
		return;
	}
	if (nt_shed(e))
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
		bpf_ringbuf_submit(rec, 0);
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
	bpf_ringbuf_submit(n, 0);
}

static __always_inline bool nt_port_match(__u16 p, const volatile struct nt_filter_insn *in)
{
	return p >= in->port && p <= in->port_end;
}

/* Whether an address is in a host or net instruction's network. An IPv4
 * address and mask have zero in their last three words. */
static __always_inline bool nt_addr_in(const __u32 *a, const volatile struct nt_filter_insn *in)
{
	return (a[0] & in->mask[0]) == in->addr[0] && (a[1] & in->mask[1]) == in->addr[1] &&
	       (a[2] & in->mask[2]) == in->addr[2] && (a[3] & in->mask[3]) == in->addr[3];
}

static __always_inline bool nt_insn_match(const struct nt_tuple *t,
					  const volatile struct nt_filter_insn *in)
{
	bool src, dst;

	switch (in->op) {
	case NT_OP_PROTO:
		return t->proto == in->proto;
	case NT_OP_HOST:
		if (t->ipv6 != in->ipv6)
			return false;
		src = nt_addr_in(t->saddr, in);
		dst = nt_addr_in(t->daddr, in);
		break;
	case NT_OP_PORT:
		if (t->proto != IPPROTO_TCP && t->proto != IPPROTO_UDP)
			return false;
		src = nt_port_match(t->sport, in);
		dst = nt_port_match(t->dport, in);
		break;
	default:
		return false;
	}
	if (in->dir == NT_DIR_SRC)
		return src;
	if (in->dir == NT_DIR_DST)
		return dst;
	return src || dst;
}

/* Evaluates the postfix filter program on a tuple. The bit stack is a u64:
 * push shifts left, and/or fold the two top bits, not flips the top bit. */
static __always_inline bool nt_filter_match(const struct nt_tuple *t)
{
	__u64 stack = 0;
	__u64 a, b;

	if (filter_len == 0)
		return true;
	/* Bounded by NT_FILTER_MAX so the verifier can see the loop end. */
	for (__u32 i = 0; i < NT_FILTER_MAX; i++) {
		if (i >= filter_len)
			break;
		const volatile struct nt_filter_insn *in = &filter_prog[i];

		switch (in->op) {
		case NT_OP_AND:
		case NT_OP_OR:
			a = stack & 1;
			b = (stack >> 1) & 1;
			stack >>= 2;
			stack = (stack << 1) | (in->op == NT_OP_AND ? (a & b) : (a | b));
			break;
		case NT_OP_NOT:
			stack ^= 1;
			break;
		default:
			stack = (stack << 1) | (nt_insn_match(t, in) ? 1 : 0);
		}
	}
	return stack & 1;
}

static __always_inline bool nt_netns_watched(__u32 inum)
{
	if (!netns_filter)
		return true;
	return bpf_map_lookup_elem(&watched_netns, &inum) != NULL;
}

static __always_inline void nt_read_ct_tuple(struct nf_conntrack_tuple *src, struct nt_tuple *t);
static __always_inline __u32 nt_ct_status(struct nf_conn *ct);

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

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_RST 0x04

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

/* Decides whether an observation is reported: the packet or its conntrack
 * entry was followed before, or one of its tuples matches the filter. A
 * match starts following both the packet and its conntrack entry (so the
 * reply, whose tuple differs after NAT, is followed too). A packet found
 * quiet is remembered so, so that its later hops cost one lookup. */
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

/* Reads the ports (ICMP: type, code and echo id) of the transport header at
 * th, and returns the offset just past it. */
static __always_inline __u32 nt_read_ports_cast(unsigned char *th, __u32 thoff, struct nt_tuple *t)
{
	switch (t->proto) {
	case IPPROTO_TCP: {
		const struct tcphdr *tcp = NT_CAST(struct tcphdr, th);

		t->sport = bpf_ntohs(tcp->source);
		t->dport = bpf_ntohs(tcp->dest);
		/* The flags byte: a bitfield in struct tcphdr. */
		t->tcp_flags = ((const __u8 *)tcp)[13];
		return thoff + 20;
	}
	case IPPROTO_UDP: {
		const struct udphdr *udp = NT_CAST(struct udphdr, th);

		t->sport = bpf_ntohs(udp->source);
		t->dport = bpf_ntohs(udp->dest);
		return thoff + UDP_HLEN;
	}
	case IPPROTO_ICMP: {
		const struct icmphdr *icmp = NT_CAST(struct icmphdr, th);

		t->sport = (icmp->type << 8) | icmp->code;
		t->dport = bpf_ntohs(icmp->un.echo.id);
		return thoff + 8;
	}
	}
	return thoff;
}

/* nt_read_ipv4 where bpf_rdonly_cast exists: only the fields used. */
static __always_inline __u32 nt_read_ipv4_cast(unsigned char *head, __u32 off, struct nt_tuple *t)
{
	const struct iphdr *ip = NT_CAST(struct iphdr, head + off);
	/* version and ihl share the first byte (bitfields). */
	__u8 vihl = *(const __u8 *)ip;
	__u32 thoff;

	if ((vihl >> 4) != 4 || (vihl & 0xf) < 5)
		return 0;
	t->saddr[0] = ip->saddr;
	t->daddr[0] = ip->daddr;
	t->proto = ip->protocol;
	thoff = off + (vihl & 0xf) * 4;
	/* Later fragments carry no transport header. */
	if (bpf_ntohs(ip->frag_off) & IP_OFFSET_MASK)
		return thoff;
	return nt_read_ports_cast(head + thoff, thoff, t);
}

/* Reads the ports (ICMP and ICMPv6: type, code and echo id) from the
 * first bytes of a transport header, and returns the offset just past it. */
static __always_inline __u32 nt_ports_from(const __u8 *th, __u32 thoff, struct nt_tuple *t)
{
	switch (t->proto) {
	case IPPROTO_TCP:
		t->sport = (th[0] << 8) | th[1];
		t->dport = (th[2] << 8) | th[3];
		t->tcp_flags = th[13];
		return thoff + 20;
	case IPPROTO_UDP:
		t->sport = (th[0] << 8) | th[1];
		t->dport = (th[2] << 8) | th[3];
		return thoff + UDP_HLEN;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		t->sport = (th[0] << 8) | th[1];
		t->dport = (th[4] << 8) | th[5];
		return thoff + 8;
	}
	return thoff;
}

/* Reads an IPv4 header and its ports at off from head. Returns the offset
 * just past the transport header, or 0 when there is no IPv4 packet there.
 * Without bpf_rdonly_cast: in one probe read when the header has no
 * options. */
static __always_inline __u32 nt_read_ipv4(unsigned char *head, __u32 off, struct nt_tuple *t)
{
	struct {
		struct iphdr ip;
		__u8 th[20];
	} h;
	__u32 thoff;

	if (bpf_rdonly_cast)
		return nt_read_ipv4_cast(head, off, t);
	if (bpf_probe_read_kernel(&h, sizeof(h), head + off))
		return 0;
	if (h.ip.version != 4 || h.ip.ihl < 5)
		return 0;
	t->saddr[0] = h.ip.saddr;
	t->daddr[0] = h.ip.daddr;
	t->proto = h.ip.protocol;
	thoff = off + h.ip.ihl * 4;
	/* Later fragments carry no transport header. */
	if (bpf_ntohs(h.ip.frag_off) & IP_OFFSET_MASK)
		return thoff;
	if (h.ip.ihl > 5 && bpf_probe_read_kernel(h.th, 14, head + thoff))
		return thoff;
	return nt_ports_from(h.th, thoff, t);
}

/* IPv6 extension headers walked to reach the transport header; a packet
 * with more is reported without ports. */
#define NT_IPV6_EXT_MAX 6
#define NT_NEXTHDR_HOP 0
#define NT_NEXTHDR_ROUTING 43
#define NT_NEXTHDR_FRAGMENT 44
#define NT_NEXTHDR_AUTH 51
#define NT_NEXTHDR_DEST 60

/* Reads an IPv6 header, its extension headers and its ports at off from
 * head. Returns the offset just past the transport header, or 0 when there
 * is no IPv6 packet there. */
static __always_inline __u32 nt_read_ipv6(unsigned char *head, __u32 off, struct nt_tuple *t)
{
	struct ipv6hdr ip;
	__u32 thoff = off + sizeof(ip);
	__u8 th[14];
	__u8 next;

	if (bpf_probe_read_kernel(&ip, sizeof(ip), head + off) || ip.version != 6)
		return 0;
	__builtin_memcpy(t->saddr, &ip.saddr, sizeof(t->saddr));
	__builtin_memcpy(t->daddr, &ip.daddr, sizeof(t->daddr));
	t->ipv6 = 1;
	next = ip.nexthdr;
	/* Bounded for the verifier. Each header's first two bytes are the next
	 * header and its length (in 8-byte units past the first 8; AH in
	 * 4-byte units past the first 8). */
	for (int i = 0; i < NT_IPV6_EXT_MAX; i++) {
		if (next != NT_NEXTHDR_HOP && next != NT_NEXTHDR_ROUTING && next != NT_NEXTHDR_DEST &&
		    next != NT_NEXTHDR_FRAGMENT && next != NT_NEXTHDR_AUTH)
			break;
		if (bpf_probe_read_kernel(th, 4, head + thoff))
			return thoff;
		if (next == NT_NEXTHDR_FRAGMENT) {
			next = th[0];
			thoff += 8;
			/* Later fragments carry no transport header. */
			if (((th[2] << 8) | th[3]) & ~7) {
				t->proto = next;
				return thoff;
			}
			continue;
		}
		thoff += next == NT_NEXTHDR_AUTH ? (th[1] + 2) * 4 : (th[1] + 1) * 8;
		next = th[0];
	}
	t->proto = next;
	if (bpf_probe_read_kernel(th, sizeof(th), head + thoff))
		return thoff;
	return nt_ports_from(th, thoff, t);
}

/* Reads the IP header at off of a packet whose family skb->protocol gives
 * (no read of the packet for it); 0 for anything but IP. */
static __always_inline __u32 nt_read_l3(__u16 protocol, unsigned char *head, __u32 off, struct nt_tuple *t)
{
	if (protocol == bpf_htons(ETH_P_IP))
		return nt_read_ipv4(head, off, t);
	if (protocol == bpf_htons(ETH_P_IPV6))
		return nt_read_ipv6(head, off, t);
	return 0;
}

/* Reads the IP header at off, of either family (its version says which):
 * for a packet inside a tunnel, whose family skb->protocol does not give. */
static __always_inline __u32 nt_read_ip(unsigned char *head, __u32 off, struct nt_tuple *t)
{
	__u8 version;

	if (bpf_probe_read_kernel(&version, 1, head + off))
		return 0;
	if (version >> 4 == 6)
		return nt_read_ipv6(head, off, t);
	return nt_read_ipv4(head, off, t);
}

static __always_inline bool nt_is_vxlan_port(__u16 port)
{
	return port == vxlan_port_a || port == vxlan_port_b;
}

/* Where the IPv4 header starts: network_header when the stack has set it,
 * else skb->data (the receive tracepoint fires before the stack sets it,
 * with data already past the link-layer header). */
static __always_inline __u32 nt_l3_offset(struct sk_buff *skb, unsigned char *head, bool use_data,
					   bool direct)
{
	__u16 nh = NT_RD(direct, skb, network_header);
	unsigned char *data;

	if (!use_data && nh != NT_NO_HEADER)
		return nh;
	data = NT_RD(direct, skb, data);
	return data - head;
}

/* The sequence and acknowledgment numbers of skb's TCP header, at its
 * transport header: TCP sets it on a segment it builds (tcp_make_synack) and
 * reads its received segments through it, so it is right at both places
 * the syn point compares a SYN with its SYN-ACK. */
static __always_inline bool nt_tcp_seq_ack(struct sk_buff *skb, bool direct, __u32 *seq, __u32 *ack)
{
	unsigned char *head = NT_RD(direct, skb, head);
	__u16 th = NT_RD(direct, skb, transport_header);
	__be32 v[2];

	if (th == NT_NO_HEADER || bpf_probe_read_kernel(v, sizeof(v), head + th + 4))
		return false;
	*seq = bpf_ntohl(v[0]);
	*ack = bpf_ntohl(v[1]);
	return true;
}

/* Fills the packet tuple and, for a vxlan packet, the inner tuple and VNI.
 * Returns false for anything but IP. */
static __always_inline bool nt_parse_skb(struct sk_buff *skb, bool use_data, struct nt_event *e,
					 __u32 *vni, bool direct)
{
	unsigned char *head = NT_RD(direct, skb, head);
	__u16 proto = NT_RD(direct, skb, protocol);
	__u32 off, end;
	__u8 vx[VXLAN_HLEN];

	off = nt_l3_offset(skb, head, use_data, direct);
	end = nt_read_l3(proto, head, off, &e->tuple);
	if (!end)
		return false;
	if (e->tuple.proto != IPPROTO_UDP || !nt_is_vxlan_port(e->tuple.dport))
		return true;
	if (bpf_probe_read_kernel(vx, sizeof(vx), head + end))
		return true;
	if (nt_read_ip(head, end + VXLAN_HLEN + ETH_HLEN, &e->inner)) {
		e->flags |= NT_F_INNER;
		if (vni)
			*vni = (vx[4] << 16) | (vx[5] << 8) | vx[6];
	}
	return true;
}

static __always_inline void nt_read_ct_tuple(struct nf_conntrack_tuple *src, struct nt_tuple *t)
{
	struct nf_conntrack_tuple ct;
	const struct nf_conntrack_tuple *c = &ct;

	__builtin_memset(t, 0, sizeof(*t));
	if (bpf_rdonly_cast)
		c = NT_CAST(struct nf_conntrack_tuple, src);
	else if (bpf_probe_read_kernel(&ct, sizeof(ct), src))
		return;
	if (c->src.l3num == NT_AF_INET6) {
		t->ipv6 = 1;
		/* Unrolled: a bounded copy of four words. */
		for (int i = 0; i < 4; i++) {
			t->saddr[i] = c->src.u3.all[i];
			t->daddr[i] = c->dst.u3.all[i];
		}
	} else {
		t->saddr[0] = c->src.u3.ip;
		t->daddr[0] = c->dst.u3.ip;
	}
	t->proto = c->dst.protonum;
	if (t->proto == IPPROTO_ICMP || t->proto == IPPROTO_ICMPV6) {
		t->sport = (c->dst.u.icmp.type << 8) | c->dst.u.icmp.code;
		t->dport = bpf_ntohs(c->src.u.icmp.id);
	} else {
		t->sport = bpf_ntohs(c->src.u.all);
		t->dport = bpf_ntohs(c->dst.u.all);
	}
}

static __always_inline __u32 nt_ct_status(struct nf_conn *ct)
{
	if (bpf_rdonly_cast)
		return NT_CAST(struct nf_conn, ct)->status;
	return BPF_CORE_READ(ct, status);
}

static __always_inline __u64 nt_ct_of(struct sk_buff *skb, bool direct)
{
	return NT_RD(direct, skb, _nfct) & ~7UL;
}

static __always_inline void nt_fill_ct(struct sk_buff *skb, struct nt_event *e)
{
	unsigned long nfct = BPF_CORE_READ(skb, _nfct);
	struct nf_conn *ct = (struct nf_conn *)(nfct & ~7UL);

	if (!ct)
		return;
	e->flags |= NT_F_CT;
	e->ct.id = (__u64)ct;
	e->ct.ctinfo = nfct & 7;
	e->ct.status = BPF_CORE_READ(ct, status);
	if (bpf_core_field_exists(ct->mark))
		e->ct.mark = BPF_CORE_READ(ct, mark);
	if (bpf_core_field_exists(ct->zone))
		e->ct.zone = BPF_CORE_READ(ct, zone.id);
	nt_read_ct_tuple(&ct->tuplehash[0].tuple, &e->ct.orig);
	nt_read_ct_tuple(&ct->tuplehash[1].tuple, &e->ct.reply);
}

static __always_inline __u32 nt_dev_netns(struct net_device *dev, bool direct)
{
	if (direct)
		return dev->nd_net.net->ns.inum;
	return BPF_CORE_READ(dev, nd_net.net, ns.inum);
}

static __always_inline void nt_fill_dev(struct net_device *dev, struct nt_event *e)
{
	if (!dev)
		return;
	e->ifindex = BPF_CORE_READ(dev, ifindex);
	bpf_probe_read_kernel_str(e->ifname, sizeof(e->ifname), dev->name);
	if (!e->netns)
		e->netns = nt_dev_netns(dev, false);
}

/* The device of the route attached to the skb (_skb_refdst without its
 * noref bit). */
static __always_inline struct net_device *nt_dst_dev(struct sk_buff *skb)
{
	struct dst_entry *dst = (struct dst_entry *)(BPF_CORE_READ(skb, _skb_refdst) & ~1UL);

	if (!dst)
		return NULL;
	return BPF_CORE_READ(dst, dev);
}

static __always_inline void nt_init(struct nt_event *e, __u8 point, __u8 kind, __u64 skb)
{
	__builtin_memset(e, 0, sizeof(*e));
	e->point = point;
	e->kind = kind;
	e->hook = NT_HOOK_NONE;
	e->skb = skb;
}

/* The common path of the skb-based points: parse, filter, fill, and leave
 * the rest to the caller. Returns false when the event is not reported. */
static __always_inline bool nt_observe_skb(struct sk_buff *skb, struct net_device *dev,
					   bool use_data, struct nt_event *e, __u32 *vni, bool direct,
					   bool dropping)
{
	__u8 pkt_type;
	int verdict;

	if (!skb || !nt_parse_skb(skb, use_data, e, vni, direct))
		return false;
	if (!dropping && nt_unremarkable(nt_ct_of(skb, direct), &e->tuple, nt_inner(e)))
		return false;
	/* The namespace is needed before the filter only when namespaces are
	 * restricted; otherwise nt_fill_dev reads it for reported events. */
	if (dev && netns_filter) {
		e->netns = nt_dev_netns(dev, direct);
		if (!nt_netns_watched(e->netns))
			return false;
	}
	verdict = nt_follow(e->skb, nt_ct_of(skb, direct), &e->tuple, nt_inner(e));
	if (verdict == NT_SKIP || (verdict == NT_QUIET && !dropping))
		return false;
	nt_fill_ct(skb, e);
	nt_fill_dev(dev, e);
	/* A subnet broadcast's address says nothing; the link layer does. */
	pkt_type = BPF_CORE_READ_BITFIELD_PROBED(skb, pkt_type);
	if (pkt_type == PACKET_BROADCAST || pkt_type == PACKET_MULTICAST)
		e->flags |= NT_F_GROUP;
	return true;
}

/* Entry state of a kprobe/kretprobe pair. kretprobes have no arguments, and
 * the entry cannot be keyed by pid_tgid: it is 0 for every softirq, so two
 * CPUs' softirqs or a softirq nested in a process's call would overwrite each
 * other. Instead each CPU keeps a stack of open calls: a softirq that
 * interrupts a call on this CPU returns before the call it interrupted, so
 * calls end in the reverse order they began (LIFO). */
#define NT_CALL_DEPTH 8

struct nt_call {
	__u64 obj;   /* the object the call is about (skb, socket) */
	__u64 aux;   /* a second argument (namespace, socket) */
	__u32 v[4];  /* per-probe values taken at entry */
};

struct nt_call_stack {
	__u32 depth;
	__u32 _pad;
	struct nt_call calls[NT_CALL_DEPTH];
};

#define NT_CALL_STACK(name)                                   \
	struct {                                              \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);      \
		__uint(max_entries, 1);                       \
		__type(key, __u32);                           \
		__type(value, struct nt_call_stack);          \
	} name SEC(".maps")

static __always_inline void nt_call_push(void *stacks, const struct nt_call *c)
{
	__u32 key = 0;
	struct nt_call_stack *s = bpf_map_lookup_elem(stacks, &key);
	__u32 d;

	if (!s)
		return;
	d = s->depth;
	/* A deeper nesting than NT_CALL_DEPTH is not possible for these
	 * functions; counting it keeps the pops balanced if it happens. The
	 * masked index is for the verifier, which needs a bound it can see. */
	if (d < NT_CALL_DEPTH)
		s->calls[d & (NT_CALL_DEPTH - 1)] = *c;
	s->depth = d + 1;
}

/* Pops the innermost open call into c; false when there is none or it
 * was not recorded. */
static __always_inline bool nt_call_pop(void *stacks, struct nt_call *c)
{
	__u32 key = 0;
	struct nt_call_stack *s = bpf_map_lookup_elem(stacks, &key);
	__u32 d;

	if (!s || s->depth == 0)
		return false;
	d = --s->depth;
	if (d >= NT_CALL_DEPTH)
		return false;
	*c = s->calls[d & (NT_CALL_DEPTH - 1)];
	return true;
}

#endif
