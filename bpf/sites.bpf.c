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

/* Each handler is a call of its own (static, so verified with the
 * caller's argument types): their frames (parsed tuples, queue snapshots)
 * follow one another instead of adding up on the 512-byte stack. */
static __noinline bool xmit_vxlan(struct sk_buff *skb, struct net_device *dev)
{
	return vxlan_at_xmit(skb, dev);
}

static __noinline void xmit_dev(struct sk_buff *skb, struct net_device *dev)
{
	dev_seen(skb, dev, NT_KIND_DEV_TX, true);
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(site_xmit, struct sk_buff *skb, struct net_device *dev)
{
	/* A tunnelled packet the vxlan handler decided not to report, the
	 * device handler would not report either: it decides on the same skb
	 * at the same device. Not asking twice saves a parse, and the
	 * encapsulated packet's is of two headers. */
	if (on_vxlan_xmit && xmit_vxlan(skb, dev))
		return 0;
	if (on_dev_tx)
		xmit_dev(skb, dev);
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
