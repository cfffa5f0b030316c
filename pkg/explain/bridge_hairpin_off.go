package explain

import (
	"fmt"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// bridgeHairpinOff: a pod called a Service whose endpoint is the pod
// itself, and its node DNATed the request back to the pod's own address.
// With the bridge's netfilter calls on (bridge-nf-call-iptables, which
// kube-proxy needs), a DNAT to an address on the same bridge keeps the
// frame bridged, and the bridge must send it back out the port it came in
// on: it does only when that port's hairpin mode is on, and otherwise
// frees it without a drop reason (br_forward, inlined in
// br_handle_frame_finish). The kernel says nothing more; the rule reasons
// from the DNAT to the sender's own address and the bridge code freeing
// the request on the port it came in on, both seen.
func bridgeHairpinOff(f *flow.Flow, n Context) *Finding {
	p, d := dnat(f)
	if d == nil || d.Tuple.Src != d.Tuple.Dst {
		return nil
	}
	in, drop := hairpinDrop(n, p, d)
	if drop == nil {
		return nil
	}
	port := drop.Ifname.String()
	fd := &Finding{
		Evidence: []Evidence{
			evidence(n, in, "request received from the pod on %s, a port of the bridge", where(n, in)),
			evidence(n, d, "%s: to the sender's own address", natFact(n, d)),
			evidence(n, drop, "freed by the bridge (%s, no drop reason) on %s, the port it came in on", n.SymbolName(drop.Drop.Location), where(n, drop)),
		},
		NetfilterRules: natRules(n, p, d),
	}
	fd.Evidence = append(fd.Evidence, ruleFacts(n, d, fd.NetfilterRules)...)
	fd.Service = serviceOf(n, p, d, fd.NetfilterRules)
	pre := d.NAT.Pre
	fd.Summary = fmt.Sprintf("%s %s -> %s was DNATed to %s, the sender itself, in %s %s: the bridge %s had to send it back out "+
		"the port it came in on, %s, and dropped it there (%s), as a bridge does when the port's hairpin mode is off. "+
		"Turn hairpin mode on: `hairpinMode: true` in the CNI bridge plugin's configuration (kubenet: the kubelet's "+
		"--hairpin-mode=hairpin-veth), or at once `ip link set %s type bridge_slave hairpin on` in %s.",
		packetWord(pre), fd.atPod(n, src(pre)), withService(dst(pre), fd.Service), dst(d.Tuple), n.NetnsName(d.Netns), d.Hook,
		d.Ifname, port, n.SymbolName(drop.Drop.Location), port, n.NetnsName(drop.Netns))
	return fd
}

// hairpinDrop returns where the DNATed request p came into d's namespace
// and where the bridge freed it on that same port, after d.
func hairpinDrop(n Context, p *flow.Packet, d *event.Event) (in, drop *event.Event) {
	for i := range p.Events {
		e := &p.Events[i]
		if e.Netns != d.Netns || e.Ifname.String() == "" {
			continue
		}
		switch {
		case e.Time <= d.Time && e.Point == event.PointDev && e.Kind == event.KindDevRx:
			in = e
		case in != nil && e.Time >= d.Time && e.Point == event.PointDrop && e.Ifname == in.Ifname &&
			strings.HasPrefix(n.SymbolName(e.Drop.Location), "br_"):
			return in, e
		}
	}
	return nil, nil
}
