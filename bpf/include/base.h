/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What every nettrace BPF object compiles against: kernel types, the helpers
 * library, the event layout, protocol constants, how kernel fields are read,
 * and the settings the loader writes before load.
 */
#ifndef NETTRACE_BASE_H
#define NETTRACE_BASE_H

#include "vmlinux.h"
#include "arch.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "nettrace.h"
#include "args.h"

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
volatile const __u32 healthy_count = 0; /* 1: hold healthy connections' records (gate.h) */
volatile const __u16 vxlan_port_a = 4789;
volatile const __u16 vxlan_port_b = 8472;

#endif
