/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The maps every object declares. The Go loader creates each once and hands
 * it to every object, so all points share the ring buffer, the loss counters,
 * the followed packets and entries and the packet identities.
 */
#ifndef NETTRACE_MAPS_H
#define NETTRACE_MAPS_H

#include "base.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 25); /* --ring-size's default */
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
	__u32 netns; /* where the NAT runs: its re-route looks up routes there */
	__u8 active;
	__u8 followed;
	__u8 _pad[2];
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

/* The namespaces whose leaving SYN-ACKs the nat point notes in
 * synack_slots (its netfilter programs are linked there), each with the
 * kernel time from which it does: a SYN consumed without a SYN-ACK noted
 * is a drop only there, and only once a SYN-ACK sent before the links were
 * made can no longer be the one it lacks (syn_answers_noted). Elsewhere (a pod's namespace the
 * programs are not linked in yet) it is reported as reaching the listener,
 * its answer unseen (NT_SYN_UNOBSERVED). Filled by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} synack_noted SEC(".maps");

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

/* The packet journey pending on this CPU: an IPv4 packet's record held
 * while the packet's next events on this CPU (the same skb and identity,
 * the same inner tuple or the packet decapsulated from it; NAT may
 * translate its addresses and ports), and the TCP events and queued SYNs
 * reported meanwhile, are added to it as hops; sent as one record when
 * anything else is submitted on this CPU, when the packet is encapsulated
 * or freed, when it holds NT_JOURNEY_HOPS hops, or when user space
 * flushes every CPU (journey_flush, before it counts losses). A packet
 * crosses veth pairs, bridges, its namespaces' NAT hooks and the tunnel's
 * receiving end on one CPU, one step after the other: one record, not one
 * per step. Per CPU, so no other CPU touches it; busy guards it against a
 * program nested on this CPU (a softirq's, or the flush's interrupt),
 * which then submits its event on its own. events counts the journey's
 * events per point, for the shed and lost counters. The record is head
 * and what follows it in tail: the packet's first snap_len bytes
 * (head.caplen of them copied), padded to 8, the hops, their count. */
struct nt_journey {
	__u8 pending;
	__u8 busy;
	__u8 hops;
	__u8 events[NT_POINT_MAX];
	__u8 _pad[5];
	struct nt_event4 next; /* the event being added, narrowed */
	/* The connection the packet belongs to, for the gate (gate.h). */
	struct nt_conn_view conn;
	/* held_len, head and tail are a struct nt_held: the gate holds a
	 * journey by copying it from here. */
	__u32 held_len;
	__u32 _held_pad;
	struct nt_event4 head;
	__u8 tail[NT_SNAP_MAX + NT_JOURNEY_HOPS * sizeof(struct nt_event4) + sizeof(struct nt_hops_tail)];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_journey);
} journeys SEC(".maps");

/* A record held in the kernel while its connection looks healthy (gate.h):
 * a journey (struct nt_journey from held_len on) or a record of its own. */
struct nt_held {
	__u32 len;
	__u32 busy; /* held_scratch only: a program on this CPU is building it */
	__u8 rec[sizeof(struct nt_event4) + NT_SNAP_MAX + NT_JOURNEY_HOPS * sizeof(struct nt_event4) +
		 sizeof(struct nt_hops_tail)];
};

_Static_assert(__builtin_offsetof(struct nt_journey, head) - __builtin_offsetof(struct nt_journey, held_len) ==
		       __builtin_offsetof(struct nt_held, rec),
	       "a journey from held_len on is a struct nt_held");
_Static_assert(sizeof(struct nt_journey) - __builtin_offsetof(struct nt_journey, held_len) == sizeof(struct nt_held),
	       "a journey from held_len on is a struct nt_held");

/* The connections the gate follows, by their canonical tuples: an entry of
 * its own (alias 0) for each connection, and aliases for the connection's
 * other tuples (after NAT, inside the tunnel on the other node). LRU: a
 * connection that never visibly ends is forgotten eventually, and a failure
 * of it after that finds its records missing. The loader sizes it (--hold). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct nt_conn_key);
	__type(value, struct nt_conn);
} conns SEC(".maps");

/* The records held, by connection (its gid) and order. LRU: what a
 * connection's trouble then finds missing is counted, never guessed. One
 * entry while the gate is off (the loader sizes it). */
struct nt_held_key {
	__u64 gid;
	__u32 seq;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct nt_held_key);
	__type(value, struct nt_held);
} held SEC(".maps");

/* Where a record of its own is built before it is held. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_held);
} held_scratch SEC(".maps");

/* Declares nt_<name>_take and nt_<name>_give over a per-CPU stack of
 * slots: map's one entry is a struct with depth and slot[max] (max a power
 * of two). Programs nest on one CPU (a softirq's inside a process's, an
 * NMI's inside any): each takes the next slot and gives it back before the
 * one it interrupted resumes. take returns NULL when all are taken. */
#define NT_SLOT_STACK(name, type, map, max)                                  \
	static __always_inline type *nt_##name##_take(void)                  \
	{                                                                    \
		__u32 key = 0, d;                                            \
		typeof(map.value) s = bpf_map_lookup_elem(&map, &key);       \
                                                                             \
		if (!s)                                                      \
			return NULL;                                         \
		d = s->depth;                                                \
		if (d >= (max))                                              \
			return NULL;                                         \
		s->depth = d + 1;                                            \
		return &s->slot[d & ((max) - 1)];                            \
	}                                                                    \
                                                                             \
	static __always_inline void nt_##name##_give(type **slot)            \
	{                                                                    \
		__u32 key = 0;                                               \
		typeof(map.value) s;                                         \
                                                                             \
		if (!*slot)                                                  \
			return;                                              \
		s = bpf_map_lookup_elem(&map, &key);                         \
		if (s && s->depth)                                           \
			s->depth--;                                          \
	}

/* What the gate works in, off the 512-byte stack: a slot per program
 * nested on a CPU (NT_SLOT_STACK), as deep as event slots. */
#define NT_GATE_DEPTH 4

struct nt_gate_scratch {
	struct nt_conn_view view; /* a record of its own's; a journey keeps its own */
	struct nt_conn fresh;     /* a connection's entry being made */
	struct nt_held_key key;   /* where a record is held */
	struct nt_conn_key root;  /* the key of the connection's entry */
};

struct nt_gate_slots {
	__u32 depth;
	__u32 _pad;
	struct nt_gate_scratch slot[NT_GATE_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_gate_slots);
} gate_slots SEC(".maps");

/* The gate's counters (enum nt_gate_stat), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NT_GATE_STATS);
	__type(key, enum nt_gate_stat); /* in BTF, for the Go side's check */
	__type(value, __u64);
} gate_stats SEC(".maps");

/* Events are built in a per-CPU slot (NT_SLOT_STACK), not on the stack:
 * with addresses of either family an event takes most of the 512-byte BPF
 * stack. */
#define NT_EVENT_DEPTH 4

struct nt_event_slots {
	__u32 depth;
	__u32 _pad;
	struct nt_event slot[NT_EVENT_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_event_slots);
} event_slots SEC(".maps");

/* Slot 0 is set to 1 the first time anything is tracked, so that until then
 * the tracked maps are not even looked up. A map, not a global: globals live
 * in each object's own .bss, and this flag must be shared by all of them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tracking SEC(".maps");

#endif
