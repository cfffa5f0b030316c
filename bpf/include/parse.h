/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Reading kernel objects: a packet's IP and transport headers (and a vxlan
 * packet's inner ones), its conntrack entry and its device.
 */
#ifndef NETTRACE_PARSE_H
#define NETTRACE_PARSE_H

#include "base.h"

/* The TCP flags of a tuple's tcp_flags (the header's flags byte). */
#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_RST 0x04
#define TCP_FLAG_ACK 0x10
#define TCP_FLAGS_SYNACK (TCP_FLAG_SYN | TCP_FLAG_ACK)

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

/* How the walk below steps over each IPv6 next-header value, 0 where it
 * stops (the transport header, anything else): the header is
 * ((its second byte & MASK) + ADD) << SHIFT bytes long. The extension
 * headers count 8-byte units past their first 8, AH 4-byte units past its
 * first 8; a fragment header is 8 bytes, its second byte reserved.
 *
 * A table rather than comparisons, for the verifier: a load at an unknown
 * index tells it nothing of the header, so each step of the walk is one
 * path for it. Compared, next was a different constant on each path, at
 * each of the six steps, and the walk was most of what the verifier spent
 * on every program that parses a packet, each time nettrace started. */
#define NT_EXT(mask, add, shift) (1U << 24 | (shift) << 16 | (add) << 8 | (mask))
#define NT_EXT_FRAGMENT (1U << 25)
static volatile const __u32 nt_ipv6_ext[256] = {
	[NT_NEXTHDR_HOP] = NT_EXT(0xff, 1, 3),
	[NT_NEXTHDR_ROUTING] = NT_EXT(0xff, 1, 3),
	[NT_NEXTHDR_DEST] = NT_EXT(0xff, 1, 3),
	[NT_NEXTHDR_AUTH] = NT_EXT(0xff, 2, 2),
	[NT_NEXTHDR_FRAGMENT] = NT_EXT(0, 1, 3) | NT_EXT_FRAGMENT,
};

/* Reads an IPv6 header, its extension headers and its ports at off from
 * head. Returns the offset just past the transport header, or 0 when there
 * is no IPv6 packet there. */
static __always_inline __u32 nt_read_ipv6(unsigned char *head, __u32 off, struct nt_tuple *t)
{
	struct ipv6hdr ip;
	__u32 thoff = off + sizeof(ip);
	__u8 th[14];
	__u8 next;
	__u32 ext;

	if (bpf_probe_read_kernel(&ip, sizeof(ip), head + off) || ip.version != 6)
		return 0;
	__builtin_memcpy(t->saddr, &ip.saddr, sizeof(t->saddr));
	__builtin_memcpy(t->daddr, &ip.daddr, sizeof(t->daddr));
	t->ipv6 = 1;
	next = ip.nexthdr;
	/* Bounded for the verifier. Each header's first two bytes are the next
	 * header and its length. */
	for (int i = 0; i < NT_IPV6_EXT_MAX; i++) {
		ext = nt_ipv6_ext[next];
		if (!ext)
			break;
		if (bpf_probe_read_kernel(th, 4, head + thoff))
			return thoff;
		next = th[0];
		thoff += ((th[1] & (ext & 0xff)) + ((ext >> 8) & 0xff)) << ((ext >> 16) & 7);
		/* Later fragments carry no transport header. */
		if ((ext & NT_EXT_FRAGMENT) && (((th[2] << 8) | th[3]) & ~7)) {
			t->proto = next;
			return thoff;
		}
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

/* Whether a packet this host sends may be a TCP SYN-ACK, from the flags
 * byte at its transport header (the stack sets it on every packet it
 * builds): one byte read, where parsing it reads all its headers. A packet
 * of another protocol may pass, so the parse still decides; one without a
 * transport header is not a segment TCP built. */
static __always_inline bool nt_sent_maybe_synack(struct sk_buff *skb, bool direct)
{
	unsigned char *head = NT_RD(direct, skb, head);
	__u16 th = NT_RD(direct, skb, transport_header);
	__u8 flags;

	if (th == NT_NO_HEADER)
		return false;
	if (bpf_rdonly_cast)
		flags = ((const __u8 *)NT_CAST(struct tcphdr, head + th))[13];
	else if (bpf_probe_read_kernel(&flags, 1, head + th + 13))
		return false;
	return (flags & TCP_FLAGS_SYNACK) == TCP_FLAGS_SYNACK;
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

#endif
