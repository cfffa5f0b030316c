// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * dev: a packet entering or leaving a device, to follow it across veth
 * pairs, bridges and namespaces. Preferred: the BTF tracepoints (typed
 * arguments; transmit runs in the shared transmit site, sites.bpf.c).
 * Fallback: the classic tracepoints, whose records carry the skb address
 * only.
 */
#include "dev.h"

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(dev_rx, struct sk_buff *skb)
{
	dev_seen(skb, skb->dev, NT_KIND_DEV_RX, true);
	return 0;
}

SEC("tracepoint/net/netif_receive_skb")
int dev_rx_tp(struct trace_event_raw_net_dev_template *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx->skbaddr;

	dev_seen(skb, BPF_CORE_READ(skb, dev), NT_KIND_DEV_RX, false);
	return 0;
}

SEC("tracepoint/net/net_dev_start_xmit")
int dev_tx_tp(struct trace_event_raw_net_dev_start_xmit *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx->skbaddr;

	dev_seen(skb, BPF_CORE_READ(skb, dev), NT_KIND_DEV_TX, false);
	return 0;
}
