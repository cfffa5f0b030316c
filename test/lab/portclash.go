package lab

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"
)

// snat-port-clash's addresses and ports: pod p3 beside p1 on node 1, the
// database off the cluster both call (on the underlay's router), the
// source port both bind, and node 1's queue after SNAT.
const (
	Pod3IP       = "10.244.1.11"
	DatabasePort = 5432
	ClashSrcPort = 41000
	SNATQueue    = 8
)

// keepPorts drops --random-fully from flannel's MASQUERADE rules in a nat
// table: flannel writes it only where iptables supports it, and without
// it a masquerade keeps each connection's source port when it can.
func keepPorts(rules string) string {
	lines := strings.Split(rules, "\n")
	for i, l := range lines {
		if strings.Contains(l, `"flanneld masq"`) {
			lines[i] = strings.TrimSuffix(l, " --random-fully")
		}
	}
	return strings.Join(lines, "\n")
}

// 11. Pods p1 and p3 on node 1 call a database off the cluster at the same
// moment, both from source port 41000. Node 1's flannel masquerades both
// to its own address with a MASQUERADE that keeps source ports (no
// --random-fully): each SNAT keeps port 41000, for neither entry is
// confirmed when the other's port is chosen (kubernetes#76699). A netfilter
// queue after SNAT (an nftables chain at POSTROUTING, priority 200, as an
// IPS or a policy agent has) holds the first SYN (p1's, p3's starting 20
// ms later) until the other's has passed, making certain the race a busy
// node runs at random: the other's entry is confirmed first, and conntrack
// drops the held SYN when it confirms its own (insert_failed); its client
// connects a second later with its retransmission, given another port.
// The healthy twin's MASQUERADE has --random-fully, as flannel writes it:
// the queue holds the first SYN all the same, and the two SNATs pick
// different ports.
func snatPortClash(healthy bool, f Family) *Scenario {
	node1 := nodeRules(f, 0)
	if !healthy {
		node1 = keepPorts(node1)
	}
	db := netip.AddrPortFrom(netip.MustParseAddr(f.Router), DatabasePort)
	client := func(pod string, alongside bool) Client {
		return Client{Namespace: Prefix + pod, Target: db.String(), Count: 1, Timeout: 3 * time.Second, SrcPort: ClashSrcPort, Alongside: alongside}
	}
	return &Scenario{
		Description: fmt.Sprintf("pods p1 and p3 on node 1 call %s off the cluster at once, both from port %d; node 1 masquerades them without --random-fully, and a queue after SNAT holds the first SYN until the other's has passed",
			db, ClashSrcPort),
		Pods:    withPods(Pod{"p3", 1, Pod3IP, "fd00:10:244:1::11"}),
		Servers: []Server{{Off: &Peer{Namespace: NsUnderlay, Addr: db}, Port: DatabasePort, Accept: true}},
		Rules:   map[string]string{NsNode1: node1, NsNode2: nodeRules(f, 1)},
		Prepare: func() error { return queueAfterSNAT(NsNode1, db, SNATQueue) },
		Queues:  []Queue{{Namespace: NsNode1, Num: SNATQueue, HoldFirst: true}},
		Clients: []Client{client("p1", false), client("p3", true)},
	}
}

// nfqueueTargetRev is the revision of xt_NFQUEUE's target whose info is
// struct xt_NFQ_info_v3 (queue number, queues total, flags), and
// nfqFlagBypass its flag that lets packets pass when no one listens.
const (
	nfqueueTargetRev = 3
	nfqFlagBypass    = 0x01
)

// queueAfterSNAT adds to namespace ns an nftables chain at POSTROUTING,
// priority 200 (after SNAT, before conntrack confirms), that queues the
// SYNs to dst on netfilter queue num. The chain's rule queues through
// xt_NFQUEUE (nft_compat), as iptables-nft does: nft's own queue
// expression (nft_queue) is not built on every kernel of ours, and
// iptables' tables have no chain that runs after SNAT.
func queueAfterSNAT(ns string, dst netip.AddrPort, num uint16) error {
	f, err := os.Open(nsPath(ns))
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		return fmt.Errorf("nftables in %s: %w", ns, err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "ntlab-ips"})
	prio := nftables.ChainPriority(200)
	ch := c.AddChain(&nftables.Chain{Name: "post", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPostrouting, Priority: &prio})
	info := make(xt.Unknown, 8) // the struct's 6 bytes, padded as xt aligns it
	binary.NativeEndian.PutUint16(info[0:], num)
	binary.NativeEndian.PutUint16(info[2:], 1)
	binary.NativeEndian.PutUint16(info[4:], nfqFlagBypass)
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 9, Len: 1}, // protocol
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}, // daddr
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dst.Addr().AsSlice()},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, // dport
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, dst.Port())},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1}, // flags
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}}, // SYN without ACK
		&expr.Target{Name: "NFQUEUE", Rev: nfqueueTargetRev, Info: &info},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("queue after SNAT in %s: %w", ns, err)
	}
	return nil
}
