// Package probe loads nettrace's BPF programs and attaches each observation
// point with the best method the running kernel allows, falling back point
// by point and saying why. It owns the kernel side only: what it reads out
// is raw event records for package event.
package probe

import (
	"github.com/cilium/ebpf"
)

// Method is a way to attach an observation point.
type Method string

// Attach methods, from the most to the least precise.
const (
	MethodFentry     Method = "fentry"
	MethodKprobe     Method = "kprobe"
	MethodTpBTF      Method = "tp_btf"
	MethodTracepoint Method = "tracepoint"
	MethodNetfilter  Method = "netfilter"
	// MethodUser is observation done in user space from other points' events
	// plus sock_diag and the netns SNMP counters (the syn point's fallback).
	MethodUser Method = "sock_diag"
)

// program is one BPF program of a method and what it attaches to.
type program struct {
	name string
	// candidates are the kernel functions (fentry, kprobe) or tracepoints
	// (tp_btf: "name", tracepoint: "group/name") it may attach to; the first
	// this kernel has is used.
	candidates []string
	// site, for a tp_btf handler, names the shared program it runs in
	// (sites.go) instead of a program of its own.
	site string
}

type methodDef struct {
	method   Method
	programs []program
	// requires says why the method cannot work here, given the points
	// attached before it (nil: it can).
	requires func(t *Tracer) error
	// note says how the method gets the point's facts, where its target
	// alone does not.
	note string
}

type pointDef struct {
	name string
	load func() (*ebpf.CollectionSpec, error)
	// loadGate loads the object built with the kernel gate (gen.go, bpfgen).
	loadGate func() (*ebpf.CollectionSpec, error)
	methods  []methodDef
}

// natCandidates are the functions that bracket one NAT hook's translation
// with the hook signature (priv, skb, state). nf_nat_ipv4_fn is inlined on
// 6.x kernels, where nf_nat_inet_fn is what its callers call.
var natCandidates = []string{"nf_nat_ipv4_fn", "nf_nat_inet_fn"}

func hooked(method Method, candidates []string, names ...string) methodDef {
	m := methodDef{method: method}
	for _, n := range names {
		m.programs = append(m.programs, program{name: n, candidates: candidates})
	}
	return m
}

var points = []pointDef{
	{name: "nat", load: loadNat, loadGate: loadNatGate, methods: []methodDef{
		hooked(MethodFentry, natCandidates, "nat_fentry", "nat_fexit"),
		hooked(MethodKprobe, natCandidates, "nat_kprobe", "nat_kretprobe"),
		{method: MethodNetfilter, programs: []program{{name: nfProgramNames[nfBefore]}, {name: nfProgramNames[nfAfter]},
			{name: nfProgramNames[nfWatch]}}},
	}},
	{name: "route", load: loadRoute, loadGate: loadRouteGate, methods: []methodDef{
		{method: MethodFentry, programs: []program{
			{name: "route_fexit", candidates: []string{"ip_route_me_harder"}},
			{name: "route6_fexit", candidates: []string{"ip6_route_me_harder"}},
		}},
		{method: MethodKprobe, programs: []program{
			{name: "route_kprobe", candidates: []string{"ip_route_me_harder"}},
			{name: "route_kretprobe", candidates: []string{"ip_route_me_harder"}},
			{name: "route6_kprobe", candidates: []string{"ip6_route_me_harder"}},
			{name: "route6_kretprobe", candidates: []string{"ip6_route_me_harder"}},
		}},
		{method: MethodTpBTF, programs: []program{
			{name: "route_fib_lookup", candidates: []string{"fib_table_lookup"}},
			{name: "route_fib6_lookup", candidates: []string{"fib6_table_lookup"}},
		}, requires: (*Tracer).rerouteLookupAttributable},
	}},
	{name: "vxlan", load: loadVxlan, loadGate: loadVxlanGate, methods: []methodDef{
		{method: MethodFentry, programs: []program{
			{name: "vxlan_fentry_xmit", candidates: []string{"vxlan_xmit"}},
			{name: "vxlan_fentry_tunnel", candidates: []string{"udp_tunnel_xmit_skb"}},
			{name: "vxlan_fentry_tunnel6", candidates: []string{"udp_tunnel6_xmit_skb"}},
		}, requires: trampolinesTake("udp_tunnel_xmit_skb", "udp_tunnel6_xmit_skb")},
		{method: MethodKprobe, programs: []program{
			{name: "vxlan_kprobe_xmit", candidates: []string{"vxlan_xmit"}},
			{name: "vxlan_kprobe_tunnel", candidates: []string{"udp_tunnel_xmit_skb"}},
			{name: "vxlan_kprobe_tunnel6", candidates: []string{"udp_tunnel6_xmit_skb"}},
		}},
		{method: MethodTpBTF, programs: []program{{name: "vxlan_xmit", candidates: []string{"net_dev_start_xmit"}, site: "xmit"}}},
	}},
	{name: "syn", load: loadSyn, loadGate: loadSynGate, methods: []methodDef{
		{method: MethodFentry, programs: []program{
			{name: "syn_fentry", candidates: []string{"tcp_conn_request"}},
			{name: "syn_fentry_queued", candidates: []string{"inet_csk_reqsk_queue_hash_add"}},
			{name: "syn_fentry_cookie", candidates: []string{"__cookie_v4_init_sequence"}},
			{name: "syn_fentry_cookie6", candidates: []string{"__cookie_v6_init_sequence"}},
			{name: "syn_fexit", candidates: []string{"tcp_conn_request"}},
		}},
		{method: MethodKprobe, programs: []program{
			{name: "syn_kprobe", candidates: []string{"tcp_conn_request"}},
			{name: "syn_kprobe_queued", candidates: []string{"inet_csk_reqsk_queue_hash_add"}},
			{name: "syn_kprobe_cookie", candidates: []string{"__cookie_v4_init_sequence"}},
			{name: "syn_kprobe_cookie6", candidates: []string{"__cookie_v6_init_sequence"}},
			{name: "syn_kretprobe", candidates: []string{"tcp_conn_request"}},
		}},
		{method: MethodTpBTF, programs: []program{{name: "syn_consume", candidates: []string{"consume_skb"}, site: "consume"}},
			requires: (*Tracer).synConsumeUsable,
			note:     "outcome where tcp_rcv_state_process consumes a SYN: queued if its SYN-ACK left first (seen at OUTPUT), else dropped"},
		{method: MethodUser},
	}},
	{name: "drop", load: loadDrop, loadGate: loadDropGate, methods: []methodDef{
		{method: MethodTpBTF, programs: []program{
			{name: "drop_kfree", candidates: []string{"kfree_skb"}},
			{name: "drop_consume", candidates: []string{"consume_skb"}, site: "consume"},
		}},
		hooked(MethodTracepoint, []string{"skb/kfree_skb"}, "drop_kfree_tp"),
	}},
	{name: "dev", load: loadDev, loadGate: loadDevGate, methods: []methodDef{
		{method: MethodTpBTF, programs: []program{
			{name: "dev_rx", candidates: []string{"netif_receive_skb"}},
			{name: "dev_tx", candidates: []string{"net_dev_start_xmit"}, site: "xmit"},
		}},
		{method: MethodTracepoint, programs: []program{
			{name: "dev_rx_tp", candidates: []string{"net/netif_receive_skb"}},
			{name: "dev_tx_tp", candidates: []string{"net/net_dev_start_xmit"}},
		}},
	}},
	{name: "tcp", load: loadTcp, loadGate: loadTcpGate, methods: []methodDef{
		{method: MethodTpBTF, programs: []program{
			{name: "tcp_synack_retrans", candidates: []string{"tcp_retransmit_synack"}},
			{name: "tcp_rst_sent", candidates: []string{"tcp_send_reset"}},
			{name: "tcp_rst_recv", candidates: []string{"tcp_receive_reset"}},
			{name: "tcp_state", candidates: []string{"inet_sock_set_state"}},
		}},
	}},
}

// PointNames lists the observation points in report order.
func PointNames() []string {
	names := make([]string, len(points))
	for i, p := range points {
		names[i] = p.name
	}
	return names
}

// PointMethods lists a point's methods, preferred first; nil for a point
// that does not exist.
func PointMethods(point string) []Method {
	for _, p := range points {
		if p.name != point {
			continue
		}
		methods := make([]Method, len(p.methods))
		for i, m := range p.methods {
			methods[i] = m.method
		}
		return methods
	}
	return nil
}

// ProgramNames lists the kernel-visible names of every nettrace program
// (the kernel keeps 15 characters), so that leftovers can be recognised.
func ProgramNames() []string {
	all := []string{journeyFlushProgram, trialProgram}
	for _, s := range sites {
		all = append(all, s.program)
	}
	for _, p := range points {
		for _, m := range p.methods {
			for _, prog := range m.programs {
				if prog.site == "" {
					all = append(all, prog.name)
				}
			}
		}
	}
	names := make([]string, len(all))
	for i, n := range all {
		if len(n) > 15 {
			n = n[:15]
		}
		names[i] = n
	}
	return names
}
