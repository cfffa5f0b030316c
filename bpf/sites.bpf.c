// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Sites: tracepoints several points observe. One program runs there for
 * all of them, so that a packet pays one program run per tracepoint, not
 * one per point: the loader enables each point's handler with a constant
 * (a disabled handler is compiled out by the verifier) when that point
 * chooses its tracepoint method.
 */
#include "dev.h"
#include "drop.h"
#include "syn.h"
#include "vxlan.h"

volatile const bool on_vxlan_xmit = false; /* vxlan point, tp_btf method */
volatile const bool on_dev_tx = false;     /* dev point, tp_btf method */
volatile const bool on_syn_consume = false; /* syn point, tp_btf method */
volatile const bool on_drop_consume = false; /* drop point, tp_btf method */

/* The transmit site's decision, taken once for both of its points: the
 * vxlan point's entry or encapsulation (tunnel, vxlan_xmit_kind) and the
 * dev point's hop are the same skb at the same device and hook, so they
 * would parse, filter and follow alike. A packet reported is filled once,
 * and the hop is its tunnel event again. (Inlined: a call of its own
 * measured no cheaper, scripts/bench/probe-cost.sh.) */
static __always_inline void xmit_report(struct sk_buff *skb, struct net_device *dev, __u8 tunnel)
{
	NT_EVENT(e);
	__u32 vni = 0;

	if (!e)
		return;

	nt_init_decision(e);
	if (!nt_decide_skb(skb, dev, false, e, &vni, true, false))
		return;
	/* An skb with the encapsulation's marks but no inner packet the parse
	 * can read is the dev point's only. */
	if (tunnel == NT_KIND_VXLAN_ENCAP && !(e->flags & NT_F_INNER))
		tunnel = 0;
	if (!tunnel) {
		if (on_dev_tx)
			nt_report_decided(e, skb, dev, NT_POINT_DEV, NT_KIND_DEV_TX, false, true);
		return;
	}
	if (tunnel == NT_KIND_VXLAN_ENCAP)
		vxlan_report_encap(e, skb, dev, vni);
	else
		nt_report_decided(e, skb, dev, NT_POINT_VXLAN, NT_KIND_VXLAN_ENTER, false, true);
	if (on_dev_tx)
		nt_report_again(e, skb, NT_POINT_DEV, NT_KIND_DEV_TX, false, true);
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(site_xmit, struct sk_buff *skb, struct net_device *dev)
{
	__u8 tunnel = on_vxlan_xmit ? vxlan_xmit_kind(skb, dev) : 0;

	if (tunnel || on_dev_tx)
		xmit_report(skb, dev, tunnel);
	return 0;
}

/* The syn handler first: it reads the packet the drop handler forgets.
 * Plain context access, not BPF_PROG: consume_skb has its location
 * argument since Linux 6.3 only, and the verifier refuses a read past a
 * tracepoint's arguments even where the syn handler is disabled, unless
 * the read sits in the branch it prunes. */
SEC("tp_btf/consume_skb")
int site_consume(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];

	if (on_syn_consume)
		syn_at_consume(skb, (void *)ctx[1]);
	if (on_drop_consume)
		drop_consumed(skb);
	return 0;
}
