package lab

import (
	"fmt"
	"time"
)

// Overlay MTU black hole (issue 31, item 6; flannel#1011).
const (
	// TunnelMTU is the vxlan device's MTU over the underlay's 1500: 50
	// bytes less, for the outer headers. flannel gives its pods the same
	// (FLANNEL_MTU).
	TunnelMTU = 1450
	// BulkAnswer is how much p2's answer carries after its name: a first
	// flight of several full-sized segments, as a TLS server's certificate
	// chain is.
	BulkAnswer = 4000
)

// stealthICMP is a node hardening rule that keeps the node from answering
// with "destination unreachable" (so that a port scan sees nothing). It
// drops the "fragmentation needed" the node sends for a packet it cannot
// forward too, which is how path MTU discovery learns a smaller MTU.
func stealthICMP() string {
	return `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p icmp -m icmp --icmp-type destination-unreachable -m comment --comment "stealth: no unreachable replies" -j DROP
COMMIT
`
}

// 13. Pod p1 calls p2 on node 2, which answers with more than a packet.
// The pods' MTU is the bridge plugin's default, 1500, over a tunnel whose
// MTU is 1450 (a CNI configuration written by hand, without flannel's
// FLANNEL_MTU): p2's full-sized segments, DF set, cannot be forwarded
// into flannel.1 and node 2 drops them, and the "fragmentation needed" it
// sends p2 is dropped by its own hardening rule, so p2 never learns the
// path's MTU and the answer never arrives: the handshake worked, the
// first large answer hangs. In the healthy twin the pods' MTU is the
// tunnel's, under the same rule.
func mtuBlackHole(healthy bool, f Family) *Scenario {
	sc := &Scenario{
		Description: fmt.Sprintf("pod p1 calls %s on node 2, which answers with %d bytes; the pods' MTU is 1500 over flannel.1's %d, and node 2 drops the ICMP unreachable it sends",
			f.HostPort(f.Pod2, PodPort), BulkAnswer, TunnelMTU),
		Pods:    basePods,
		Servers: []Server{{Pod: "p2", Port: PodPort, Accept: true, Bulk: BulkAnswer}},
		Rules:   map[string]string{NsNode1: nodeRules(f, 0), NsNode2: nodeRules(f, 1) + stealthICMP()},
		Clients: []Client{{Namespace: Prefix + "p1", Target: f.HostPort(f.Pod2, PodPort), Count: 1, Timeout: 3 * time.Second}},
	}
	if healthy {
		sc.PodMTU = TunnelMTU
	}
	return sc
}
