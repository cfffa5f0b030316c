/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The event layout shared by every nettrace BPF program and the Go decoder
 * (pkg/event's offsets are generated from this header, through the
 * compiled object's BTF).
 *
 * One fixed-size record per observation, followed by the first caplen
 * bytes of the packet from its IP header: the fixed part keeps the Go
 * decoder branch-free; the per-point payload is a union so that it stays
 * under 200 bytes.
 *
 * Byte order: addresses stay in network byte order (as read from the
 * packet), ports are converted to host byte order in the kernel.
 *
 * Addresses: four words, IPv4 in the first (the rest zero), IPv6 in all
 * four; a tuple says which. Programs build this wide event; an event with
 * no IPv6 address is submitted narrowed to struct nt_event4, the record
 * as it was before IPv6 (and as recordings keep it): an IPv4 event costs
 * the ring buffer, user space and disk no more than it did.
 */
#ifndef NETTRACE_H
#define NETTRACE_H

#define NT_IFNAMSIZ 16
#define NT_FILTER_MAX 64
#define NT_SNAP_MAX 256 /* largest packet prefix a record carries */

/* Observation points. Values are part of the recording format: append only. */
enum nt_point {
	NT_POINT_NAT = 1,
	NT_POINT_ROUTE = 2,
	NT_POINT_VXLAN = 3,
	NT_POINT_SYN = 4,
	NT_POINT_DROP = 5,
	NT_POINT_DEV = 6,
	NT_POINT_TCP = 7,
	NT_POINT_MAX = 8,
};

/* What an event says, within its point. Append only. */
enum nt_kind {
	NT_KIND_NAT = 1,          /* tuple before and after one NAT hook */
	NT_KIND_ROUTE_LOOKUP = 2, /* FIB lookup made for a followed packet */
	NT_KIND_ROUTE_REROUTE = 3,/* ip_route_me_harder returned */
	NT_KIND_VXLAN_ENTER = 4,  /* inner packet handed to a vxlan device */
	NT_KIND_VXLAN_ENCAP = 5,  /* encapsulated packet built (outer tuple, VNI) */
	NT_KIND_SYN = 6,          /* tcp_conn_request outcome at a listener */
	NT_KIND_DROP = 7,         /* kfree_skb with a drop reason */
	NT_KIND_DEV_RX = 8,       /* packet received by a device */
	NT_KIND_DEV_TX = 9,       /* packet handed to a device for transmit */
	NT_KIND_TCP_SYNACK_RETRANS = 10,
	NT_KIND_TCP_RST_SENT = 11,
	NT_KIND_TCP_RST_RECV = 12,
	NT_KIND_TCP_STATE = 13,
};

/* nt_event.flags */
#define NT_F_INNER 0x01 /* inner holds the tuple inside a vxlan encapsulation */
#define NT_F_CT 0x02    /* ct holds the packet's conntrack entry */
#define NT_F_PRE 0x04   /* u.nat.pre is known (the pre-NAT half was observed) */
#define NT_F_GROUP 0x08 /* received as a link-layer broadcast or multicast */
#define NT_F_HOPS 0x10  /* the record carries its packet's next events (struct nt_hops_tail) */
#define NT_F_CT_INVALID 0x20 /* conntrack ran at the hook and judged the packet INVALID (NAT point) */
#define NT_F_WIDE 0x40  /* the record is a struct nt_event (else struct nt_event4) */

#define NT_HOOK_NONE 0xff

/* nt_syn.outcome */
enum nt_syn_outcome {
	NT_SYN_QUEUED = 1,             /* a request socket was created */
	NT_SYN_DROP_ACCEPT_QUEUE = 2,  /* accept queue was full */
	NT_SYN_DROP_SYN_QUEUE = 3,     /* SYN queue was full, syncookies off */
	NT_SYN_DROP_OTHER = 4,         /* PAWS, LSM, memory: no request was created */
	NT_SYN_DROP_LISTEN_DROPS = 5,  /* user space only: ListenDrops moved, cause unknown */
	NT_SYN_DROP_UNANSWERED = 6,    /* consumed by a listener without a SYN-ACK; its queues unknown */
	NT_SYN_COOKIE = 7,             /* SYN queue full: answered with a syncookie, no request kept */
	NT_SYN_UNOBSERVED = 8,         /* consumed by a listener where SYN-ACKs are not seen yet: answered or not */
};

/*
 * The record layout, declared once. Each struct below is a list of its
 * members, NT_FIELDS_<struct>(X), one X(kind, type, name) per member; the
 * macros after the lists make of each list both record forms and the
 * narrowing copy between them (NT_NARROWING, event.h), and pkg/event's
 * offsets are generated from the object's BTF (internal/layoutgen), so a
 * member added here reaches every form. The kinds:
 *   VAL     a value, the same in both forms, copied when narrowing;
 *   ZERO    declared in both forms, never copied: padding, or what only a
 *           wide record says (a narrow record holds it zero);
 *   ADDR    an address: four type words wide, the first one narrow;
 *   IFNAME  a device name, the same in both forms;
 *   STRUCT  a struct declared here: struct type wide, struct type##4 narrow;
 *   PAYLOAD the per-point union: union nt_payload wide, nt_payload4 narrow.
 */

#define NT_FIELDS_nt_tuple(X)                                                  \
	X(ADDR, __u32, saddr)                                                   \
	X(ADDR, __u32, daddr)                                                   \
	X(VAL, __u16, sport) /* ICMP: type << 8 | code */                       \
	X(VAL, __u16, dport) /* ICMP: echo id */                                \
	X(VAL, __u8, proto)                                                     \
	X(VAL, __u8, tcp_flags)                                                 \
	X(ZERO, __u8, ipv6) /* 1: IPv6 addresses, 0: IPv4 */                    \
	X(ZERO, __u8, _pad)

#define NT_FIELDS_nt_conntrack(X)                                              \
	X(VAL, __u64, id) /* the nf_conn address: stable for the entry's lifetime */ \
	X(VAL, __u32, status)                                                   \
	X(VAL, __u32, mark)                                                     \
	X(VAL, __u16, zone)                                                     \
	X(VAL, __u8, ctinfo)                                                    \
	X(ZERO, __u8, _pad[5])                                                  \
	X(STRUCT, nt_tuple, orig)                                               \
	X(STRUCT, nt_tuple, reply)

/* The payloads, one per point that has one. Their addresses have the
 * family of the event's tuple. */
#define NT_FIELDS_nt_nat(X)                                                    \
	X(STRUCT, nt_tuple, pre)                                                \
	X(VAL, __u32, out_ifindex) /* skb_dst device after the hook (re-route result) */ \
	X(ZERO, __u32, _pad)                                                    \
	X(IFNAME, char, out_ifname)

#define NT_FIELDS_nt_route(X)                                                  \
	X(VAL, __u32, oif)                                                      \
	X(ADDR, __u32, gateway)                                                 \
	X(ADDR, __u32, saddr)                                                   \
	X(VAL, __s32, err)                                                      \
	X(VAL, __u32, table)                                                    \
	X(ZERO, __u32, _pad)                                                    \
	X(IFNAME, char, oifname)

#define NT_FIELDS_nt_vxlan(X)                                                  \
	X(VAL, __u32, vni)                                                      \
	X(ADDR, __u32, remote) /* remote VTEP */                                \
	X(ADDR, __u32, local)                                                   \
	X(VAL, __u16, port)                                                     \
	X(ZERO, __u16, _pad)

/* listen_overflows and listen_drops are counter deltas in the listener's
 * namespace: filled in user space by the sock_diag method, zero from the
 * kernel. */
#define NT_FIELDS_nt_syn(X)                                                    \
	X(ADDR, __u32, laddr) /* listener address and port */                   \
	X(VAL, __u16, lport)                                                    \
	X(VAL, __u8, outcome)                                                   \
	X(ZERO, __u8, _pad)                                                     \
	X(VAL, __u32, accept_qlen)                                              \
	X(VAL, __u32, accept_max)                                               \
	X(VAL, __u32, syn_qlen)                                                 \
	X(ZERO, __u32, _pad2)                                                   \
	X(VAL, __u64, listen_overflows)                                         \
	X(VAL, __u64, listen_drops)

/* ct_count, ct_max and ct_drops: the namespace's conntrack table when
 * conntrack dropped the packet for want of an entry (its count and the
 * limit, and how many packets conntrack's drop counter counted since the
 * last reading), filled in user space, zero from the kernel.
 * dst_ifindex and dst_mtu: the device the packet was routed to when it was
 * freed, and that device's MTU (zero: no route yet), what a packet too big
 * to forward was too big for. MTUs are kept in 16 bits, an MTU above
 * (loopback's 65536) as 65535.
 * lower_mtu and src_mtu, for a packet too big to forward, filled in user
 * space (zero from the kernel): the MTU of the device under the route's
 * device when that is a tunnel (a vxlan device's underlay), and of the
 * sender's own device. */
#define NT_FIELDS_nt_drop(X)                                                   \
	X(VAL, __u64, location)                                                 \
	X(VAL, __u32, reason)                                                   \
	X(VAL, __u32, ct_count)                                                 \
	X(VAL, __u32, ct_max)                                                   \
	X(VAL, __u32, dst_ifindex)                                              \
	X(VAL, __u64, ct_drops)                                                 \
	X(VAL, __u16, dst_mtu)                                                  \
	X(VAL, __u16, lower_mtu)                                                \
	X(VAL, __u16, src_mtu)                                                  \
	X(ZERO, __u16, _pad2)

#define NT_FIELDS_nt_tcp(X)                                                    \
	X(VAL, __u8, oldstate)                                                  \
	X(VAL, __u8, newstate)                                                  \
	X(ZERO, __u8, _pad[6])                                                  \
	X(VAL, __u64, cookie) /* bpf_get_socket_cookie: never reused, unlike the address */

/* Each point's payload, P(point, member): the union's member u.member
 * holds a struct nt_member, and NT_POINT_<point>'s events carry it. */
#define NT_PAYLOADS(P)                                                         \
	P(NAT, nat)                                                             \
	P(ROUTE, route)                                                         \
	P(VXLAN, vxlan)                                                         \
	P(SYN, syn)                                                             \
	P(DROP, drop)                                                           \
	P(TCP, tcp)

/* skb_seen is when this skb address was first seen holding this packet:
 * with skb, the packet's identity. The kernel recycles an skb address as
 * soon as the packet is freed, so the address alone names many packets.
 * Last in the record so that recordings made before it decode with it
 * zero. */
#define NT_FIELDS_nt_event(X)                                                  \
	X(VAL, __u64, ts) /* bpf_ktime_get_ns */                                \
	X(VAL, __u64, skb) /* skb address (see skb_seen) */                     \
	X(VAL, __u32, netns)                                                    \
	X(VAL, __u32, ifindex)                                                  \
	X(VAL, __u8, point)                                                     \
	X(VAL, __u8, kind)                                                      \
	X(VAL, __u8, hook)                                                      \
	X(VAL, __u8, flags)                                                     \
	X(VAL, __u16, cpu)                                                      \
	X(VAL, __u16, caplen) /* packet bytes (from the IP header) after this record */ \
	X(IFNAME, char, ifname)                                                 \
	X(STRUCT, nt_tuple, tuple)                                              \
	X(STRUCT, nt_tuple, inner)                                              \
	X(STRUCT, nt_conntrack, ct)                                             \
	X(PAYLOAD, nt_payload, u)                                               \
	X(VAL, __u64, skb_seen)

/* A member of the wide form, and of the narrow one. */
#define NT_WIDE_MEMBER(kind, type, name) NT_WIDE_##kind(type, name)
#define NT_WIDE_VAL(type, name) type name;
#define NT_WIDE_ZERO(type, name) type name;
#define NT_WIDE_ADDR(type, name) type name[4];
#define NT_WIDE_IFNAME(type, name) type name[NT_IFNAMSIZ];
#define NT_WIDE_STRUCT(type, name) struct type name;
#define NT_WIDE_PAYLOAD(type, name) union type name;
#define NT_NARROW_MEMBER(kind, type, name) NT_NARROW_##kind(type, name)
#define NT_NARROW_VAL(type, name) type name;
#define NT_NARROW_ZERO(type, name) type name;
#define NT_NARROW_ADDR(type, name) type name;
#define NT_NARROW_IFNAME(type, name) type name[NT_IFNAMSIZ];
#define NT_NARROW_STRUCT(type, name) struct type##4 name;
#define NT_NARROW_PAYLOAD(type, name) union type##4 name;

/* struct type (the wide form) and struct type##4 (the narrow one). */
#define NT_STRUCTS(type)                                                       \
	struct type {                                                           \
		NT_FIELDS_##type(NT_WIDE_MEMBER)                                \
	};                                                                      \
	struct type##4 {                                                        \
		NT_FIELDS_##type(NT_NARROW_MEMBER)                              \
	}

NT_STRUCTS(nt_tuple);
NT_STRUCTS(nt_conntrack);
#define NT_PAYLOAD_STRUCTS(point, member) NT_STRUCTS(nt_##member);
NT_PAYLOADS(NT_PAYLOAD_STRUCTS)

#define NT_PAYLOAD_WIDE(point, member) struct nt_##member member;
#define NT_PAYLOAD_NARROW(point, member) struct nt_##member##4 member;
union nt_payload {
	NT_PAYLOADS(NT_PAYLOAD_WIDE)
};
union nt_payload4 {
	NT_PAYLOADS(NT_PAYLOAD_NARROW)
};

/* An event as programs build it (addresses four words), and the narrow
 * record of one without IPv6 addresses (IPv4 addresses in one word), whose
 * layout is also the recordings'. */
NT_STRUCTS(nt_event);

/* The recordings' layout: pkg/event reads and writes narrow records at the
 * offsets generated from this header, and recordings made by every earlier
 * release hold them; these keep a change here from moving them. */
#define NT_NARROW_AT(member, off) _Static_assert(__builtin_offsetof(struct nt_event4, member) == (off), \
						 "nt_event4." #member " moved: recordings hold it at " #off)
NT_NARROW_AT(tuple, 48);
NT_NARROW_AT(inner, 64);
NT_NARROW_AT(ct, 80);
NT_NARROW_AT(ct.orig, 104);
NT_NARROW_AT(u, 136);
NT_NARROW_AT(u.nat.out_ifindex, 152);
NT_NARROW_AT(u.nat.out_ifname, 160);
NT_NARROW_AT(u.route.gateway, 140);
NT_NARROW_AT(u.route.err, 148);
NT_NARROW_AT(u.route.oifname, 160);
NT_NARROW_AT(u.vxlan.port, 148);
NT_NARROW_AT(u.syn.outcome, 142);
NT_NARROW_AT(u.syn.listen_overflows, 160);
NT_NARROW_AT(u.syn.listen_drops, 168);
NT_NARROW_AT(u.tcp.cookie, 144);
NT_NARROW_AT(u.drop.ct_count, 148);
NT_NARROW_AT(u.drop.dst_ifindex, 156);
NT_NARROW_AT(u.drop.ct_drops, 160);
NT_NARROW_AT(u.drop.src_mtu, 172);
NT_NARROW_AT(skb_seen, 176);
_Static_assert(sizeof(struct nt_event4) == 184, "nt_event4 changed size: recordings hold 184 bytes an event");

/* A packet's journey: the events of one packet (the same skb, identity and
 * inner tuple; its addresses and ports as NAT translates them) made one
 * after the other on one CPU,
 * and the TCP events made among them, sent as one record (struct
 * nt_journey). A record with NT_F_HOPS is its
 * first event, its packet bytes (padded to 8), the narrow records of the
 * next events (the hops, packet bytes not repeated), then their count: the record's
 * length says where the hops are, so user space needs no snap length. */
/* Events after the record's own: room for a pod's packet from the tunnel
 * of one node to the pod on the other (the outer packet's steps through
 * both nodes and the underlay, 9 on the connection sweep's path, then the
 * inner one's to the pod, 6) and the socket states made meanwhile. 12,
 * enough before a decapsulated packet's steps joined its journey, cut it
 * in two there (docs/performance.md). */
#define NT_JOURNEY_HOPS 24

struct nt_hops_tail {
	__u32 count;
	__u32 _pad;
};

_Static_assert(sizeof(struct nt_hops_tail) == 8, "nt_hops_tail changed size: pkg/event reads its count 8 bytes from the end");

/* The gate (gate.h, --healthy count): a TCP connection's records stay in
 * the kernel while it looks healthy. Connections are keyed by their
 * canonical IPv4 tuple: the lower address and port first, so that both
 * directions share a key. */
struct nt_conn_key {
	__u32 addr_lo;
	__u32 addr_hi;
	__u16 port_lo;
	__u16 port_hi;
	__u8 proto;
	__u8 _pad[3];
};

/* What the gate knows of the connection of a record: its packet's tuple
 * (the inner one in a tunnel), its conntrack entry's original tuple and,
 * where NAT made the reply tuple another, that one; the TCP flags seen, and
 * the first packet's identity. */
struct nt_conn_view {
	struct nt_conn_key pkt;
	struct nt_conn_key ct;
	struct nt_conn_key nat;
	__u64 skb;
	__u64 skb_seen;
	__u32 syn_seq;  /* a SYN's sequence number, where read (syn_seq_known) */
	__u8 syn_seq_known;
	__u8 _pad_seq[3];
	__u8 keys;      /* NT_VIEW_* */
	__u8 tcp_flags; /* of every packet step */
	__u8 invalid;   /* conntrack judged a packet INVALID */
	__u8 gated;     /* 0: not an IPv4 TCP connection's, shipped */
	__u8 unbound;   /* a socket's event before its port was chosen */
	__u8 quoted;    /* an ICMP error: pkt is the quoted packet's */
	__u8 _pad[2];
};

#define NT_VIEW_PKT 0x01
#define NT_VIEW_CT 0x02
#define NT_VIEW_NAT 0x04

enum nt_conn_state {
	NT_CONN_HOLDING = 0,  /* healthy so far: its records are held */
	NT_CONN_SHIPPING = 1, /* in trouble: what was held went out, and the rest goes out */
	NT_CONN_ENDED = 2,    /* ended normally: its held records were dropped */
};

/* nt_conn.seen */
#define NT_SEEN_SYN 0x01
#define NT_SEEN_SYNACK 0x02
#define NT_SEEN_SEQ 0x04 /* syn_seq holds the first SYN's sequence number */

struct nt_conn {
	struct nt_conn_key root; /* an alias's connection; the entry's own key otherwise */
	__u64 gid;               /* this use of the tuple: the held records' key */
	__u64 syn_skb;           /* the first SYN's identity */
	__u64 syn_seen;
	__u32 syn_seq; /* and its sequence number, where read (NT_SEEN_SEQ) */
	__u32 held;    /* orders taken so far (the next record's order) */
	__u32 missed;  /* records not held: past NT_HELD_PER_CONN, or after it ended */
	__u32 stored;  /* a bit per order: its record is in the held map */
	__u32 claimed; /* a bit per order: taken by the one CPU that ships it (gate.h) */
	__u32 state;   /* enum nt_conn_state; a word, for an atomic exchange */
	__u8 alias;
	__u8 seen; /* NT_SEEN_* */
	__u8 _pad[6];
};

/* Records one connection may hold: a connection on a pod-to-Service path
 * over the overlay makes 8 to 12 (docs/performance.md). */
#define NT_HELD_PER_CONN 16
_Static_assert(NT_HELD_PER_CONN <= 32, "stored and claimed have a bit per order");

/* gate_stats keys. Append only: user space reads them by number. */
enum nt_gate_stat {
	NT_GATE_HELD = 0,      /* records held */
	NT_GATE_RELEASED = 1,  /* held records shipped when their connection showed trouble */
	NT_GATE_HEALTHY = 2,   /* connections that ended normally while held */
	NT_GATE_DISCARDED = 3, /* records of healthy connections never shipped */
	NT_GATE_TRIGGERED = 4, /* connections that showed trouble */
	NT_GATE_MISSING = 5,   /* records a connection in trouble lacked: evicted, over its bound, or lost */
	NT_GATE_ENDED_THEN_TROUBLE = 6, /* of MISSING: connections that ended normally, their records
					  * dropped then, and showed trouble after */
	NT_GATE_STATS = 7,
};

/* One instruction of the in-kernel filter: a postfix program over a bit stack. */
enum nt_filter_op {
	NT_OP_PROTO = 1, /* push tuple.proto == proto */
	NT_OP_HOST = 2,  /* push (addr & mask) == net, on src, dst or either */
	NT_OP_PORT = 3,  /* push port in [port, port_end], on src, dst or either */
	NT_OP_AND = 4,
	NT_OP_OR = 5,
	NT_OP_NOT = 6,
};

#define NT_DIR_ANY 0
#define NT_DIR_SRC 1
#define NT_DIR_DST 2

struct nt_filter_insn {
	__u8 op;
	__u8 dir;
	__u8 proto;
	__u8 ipv6; /* NT_OP_HOST: the family of addr and mask */
	__u16 port;
	__u16 port_end;
	__u32 addr[4];
	__u32 mask[4];
};

#endif
