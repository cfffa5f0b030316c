package test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// A ClusterIP-style DNAT in nat OUTPUT and a MASQUERADE in POSTROUTING:
// the nat events carry the tuple before and after each, and the conntrack
// entry's NAT status bits.
func TestNATTuplesAndConntrack(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, client, "c0", "10.98.1.1/24", server, "s0", "10.98.1.2/24")
	script(t,
		"ip netns exec "+client+" iptables -t nat -A OUTPUT -d 10.96.77.10 -p tcp --dport 80 -j DNAT --to-destination 10.98.1.2:8080",
		"ip netns exec "+client+" iptables -t nat -A POSTROUTING -o c0 -j MASQUERADE",
		"ip -n "+client+" route add 10.96.0.0/16 dev c0",
		// The client calls from a second address so that MASQUERADE really
		// rewrites the source (from c0's own address it is a null binding).
		"ip -n "+client+" addr add 10.99.5.5/32 dev lo",
	)
	listen(t, server, "10.98.1.2:8080", 0, true)
	w := startWatch(t, "--netns", client, "--netns", server, "host 10.96.77.10")
	if err := dial(t, client, "10.99.5.5", "10.96.77.10:80", 3*time.Second); err != nil {
		t.Fatalf("client could not connect through the DNAT: %v", err)
	}
	w.await(t, "replies un-DNATed in the client", 1, func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Netns == client && e.Translated && e.CT != nil && e.CT.Direction == "reply"
	})
	tr := w.stop(t)
	events := tr.events
	requireJourneys(t, tr)

	dnat := find(events, func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Hook == "OUTPUT" && e.Translated && e.Tuple.Flags == "S"
	})
	if len(dnat) == 0 {
		t.Fatalf("no translated SYN at nat OUTPUT:\n%s", dump(events))
	}
	d := dnat[0]
	if d.Pre.Dst != "10.96.77.10" || d.Pre.Dport != 80 || d.Tuple.Dst != "10.98.1.2" || d.Tuple.Dport != 8080 {
		t.Errorf("DNAT tuples: pre %+v post %+v", d.Pre, d.Tuple)
	}
	if d.CT == nil || !hasString(d.CT.Status, "DST_NAT") || d.CT.Orig.Dst != "10.96.77.10" || d.CT.Reply.Src != "10.98.1.2" {
		t.Errorf("conntrack of the DNATed SYN: %+v", d.CT)
	}
	if !reroutedVia(events, d, "c0") {
		t.Errorf("no re-route out of c0 after the DNAT (nat out_dev %q)", d.OutDev)
	}
	snat := find(events, func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Hook == "POSTROUTING" && e.Tuple.Flags == "S" && e.Netns == client
	})
	if len(snat) == 0 || snat[0].CT == nil || !hasString(snat[0].CT.Status, "SRC_NAT") {
		t.Fatalf("SYN at POSTROUTING without SRC_NAT status:\n%s", dump(snat))
	}
	if snat[0].Pre == nil || snat[0].Pre.Src != "10.99.5.5" || snat[0].Tuple.Src != "10.98.1.1" {
		t.Errorf("MASQUERADE: %+v -> %+v, want source 10.99.5.5 -> 10.98.1.1", snat[0].Pre, snat[0].Tuple)
	}
	// The reply is followed through the conntrack entry and un-DNATed.
	undnat := find(events, func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Netns == client && e.Translated && e.CT != nil && e.CT.Direction == "reply" &&
			e.Tuple.Src == "10.96.77.10" && e.Tuple.Sport == 80
	})
	if len(undnat) == 0 {
		t.Errorf("reply not seen un-DNATed back to 10.96.77.10:80:\n%s", dump(events))
	}
	// Followed into the server's namespace by its skb and tuple.
	if len(find(events, func(e output.JSONEvent) bool { return e.Netns == server && e.Point == "dev" })) == 0 {
		t.Errorf("packet not followed into the server namespace:\n%s", dump(events))
	}
}

// An iptables DROP and a reverse-path-filter drop, with the kernel's
// drop-reason names.
func TestDropReasons(t *testing.T) {
	a, b := newNetns(t, "a"), newNetns(t, "b")
	veth(t, a, "a0", "10.98.2.1/24", b, "b0", "10.98.2.2/24")
	script(t,
		"ip netns exec "+b+" iptables -A INPUT -p tcp --dport 9001 -j DROP",
		// rp_filter: b routes 10.97.2.0/24 via another device, so a packet
		// from there arriving on b0 fails the reverse-path check.
		"ip -n "+b+" link add other0 type veth peer name other1",
		"ip -n "+b+" link set other0 up",
		"ip -n "+b+" link set other1 up",
		"ip -n "+b+" route add 10.97.2.0/24 dev other0",
		"ip netns exec "+b+" sysctl -qw net.ipv4.conf.all.rp_filter=1",
		"ip netns exec "+b+" sysctl -qw net.ipv4.conf.b0.rp_filter=1",
		"ip -n "+a+" addr add 10.97.2.1/32 dev a0",
	)
	w := startWatch(t, "--netns", a, "--netns", b, "host 10.98.2.2")
	dial(t, a, "", "10.98.2.2:9001", 500*time.Millisecond)
	dial(t, a, "10.97.2.1", "10.98.2.2:9002", 500*time.Millisecond)
	events := w.stop(t).events

	drops := find(events, func(e output.JSONEvent) bool { return e.Point == "drop" })
	var nf, rpf bool
	for _, d := range drops {
		if d.Drop.Reason == "NETFILTER_DROP" && d.Tuple.Dport == 9001 && d.Netns == b {
			nf = true
		}
		if d.Drop.Reason == "IP_RPFILTER" && d.Tuple.Src == "10.97.2.1" && d.Tuple.Dport == 9002 && d.Dev == "b0" {
			rpf = true
		}
		if d.Drop.Location == "" || d.Drop.Location[0] == '0' {
			t.Errorf("drop location not named: %q", d.Drop.Location)
		}
	}
	if !nf || !rpf {
		t.Fatalf("NETFILTER_DROP seen %v, IP_RPFILTER seen %v; drops:\n%s", nf, rpf, dump(drops))
	}
}

// A vxlan tunnel between two namespaces over an IPv4 underlay, carrying
// IPv4 and IPv6: the packet is seen entering the vxlan device with its
// inner tuple, then leaving the underlay encapsulated with VNI and remote
// VTEP, and decapsulated on the other side. (The lab's flannel-v6.1
// carries IPv6 over an IPv6 underlay.)
func TestVXLANInnerAndOuter(t *testing.T) {
	n1, n2 := newNetns(t, "n1"), newNetns(t, "n2")
	veth(t, n1, "eth0", "172.30.0.1/24", n2, "eth0", "172.30.0.2/24")
	for _, n := range []struct{ ns, local, remote, mac, peerMAC string }{
		{n1, "172.30.0.1", "172.30.0.2", "02:00:00:00:00:01", "02:00:00:00:00:02"},
		{n2, "172.30.0.2", "172.30.0.1", "02:00:00:00:00:02", "02:00:00:00:00:01"},
	} {
		script(t,
			fmt.Sprintf("ip -n %s link add flannel.1 type vxlan id 7 local %s dev eth0 dstport 8472 nolearning", n.ns, n.local),
			fmt.Sprintf("ip -n %s link set flannel.1 address %s", n.ns, n.mac),
			fmt.Sprintf("ip -n %s link set flannel.1 up", n.ns),
			fmt.Sprintf("bridge -n %s fdb append %s dev flannel.1 dst %s", n.ns, n.peerMAC, n.remote),
		)
	}
	for _, fam := range []struct {
		name, addr1, addr2, peerPrefix string // addr1 on n1, addr2 on n2
	}{
		{"inner IPv4", "10.240.1.0", "10.240.2.0", "/24"},
		{"inner IPv6", "fd00:240:1::", "fd00:240:2::", "/64"},
	} {
		for _, n := range []struct{ ns, self, peer, peerMAC string }{
			{n1, fam.addr1, fam.addr2, "02:00:00:00:00:02"},
			{n2, fam.addr2, fam.addr1, "02:00:00:00:00:01"},
		} {
			single := "/32"
			if isIPv6(n.self) {
				single = "/128 nodad"
			}
			script(t,
				fmt.Sprintf("ip -n %s addr add %s%s dev flannel.1", n.ns, n.self, single),
				fmt.Sprintf("ip -n %s route add %s%s via %s dev flannel.1 onlink", n.ns, n.peer, fam.peerPrefix, n.peer),
				fmt.Sprintf("ip -n %s neigh add %s lladdr %s dev flannel.1", n.ns, n.peer, n.peerMAC),
			)
		}
		t.Run(fam.name, func(t *testing.T) {
			server := net.JoinHostPort(fam.addr2, "7070")
			listen(t, n2, server, 0, true)
			w := startWatch(t, "--netns", n1, "--netns", n2, "port 7070")
			if err := dial(t, n1, "", server, 3*time.Second); err != nil {
				t.Fatalf("connect over vxlan: %v", err)
			}
			w.await(t, "decapsulated packets on n2/flannel.1", 1, func(e output.JSONEvent) bool {
				return e.Point == "dev" && e.Kind == "rx" && e.Netns == n2 && e.Dev == "flannel.1" && e.Tuple.Dport == 7070
			})
			events := w.stop(t).events

			enter := find(events, func(e output.JSONEvent) bool {
				return e.Point == "vxlan" && e.Kind == "enter" && e.Dev == "flannel.1" && e.Tuple.Dport == 7070 && e.Netns == n1
			})
			encap := find(events, func(e output.JSONEvent) bool {
				return e.Point == "vxlan" && e.Kind == "encap" && e.Inner != nil && e.Inner.Dport == 7070 && e.Netns == n1
			})
			if len(enter) == 0 || len(encap) == 0 {
				t.Fatalf("vxlan enter %d, encap %d:\n%s", len(enter), len(encap), dump(events))
			}
			x := encap[0]
			if x.VXLAN.VNI != 7 || x.VXLAN.Remote != "172.30.0.2" || x.VXLAN.Local != "172.30.0.1" || x.Dev != "eth0" {
				t.Errorf("encap facts: %+v on %s", x.VXLAN, x.Dev)
			}
			if x.Tuple.Proto != "udp" || x.Tuple.Dport != 8472 || x.Inner.Src != fam.addr1 || x.Inner.Dst != fam.addr2 {
				t.Errorf("outer %+v inner %+v", x.Tuple, x.Inner)
			}
			if enter[0].Skb != x.Skb {
				t.Errorf("inner and encapsulated packet have different skb ids: %s vs %s", enter[0].Skb, x.Skb)
			}
			// The transmit site's device handler reports the packet the
			// vxlan handler reports, at the vxlan device and at the
			// underlay (it skips only what the other declined).
			for _, dev := range []string{"flannel.1", "eth0"} {
				tx := find(events, func(e output.JSONEvent) bool {
					return e.Point == "dev" && e.Kind == "tx" && e.Netns == n1 && e.Dev == dev && e.Skb == x.Skb
				})
				if len(tx) == 0 {
					t.Errorf("the tunnelled packet's transmission on n1/%s not seen:\n%s", dev, dump(events))
				}
			}
			// Received on the far side: outer on eth0, then inner on flannel.1.
			rx := find(events, func(e output.JSONEvent) bool {
				return e.Point == "dev" && e.Kind == "rx" && e.Netns == n2 && e.Dev == "flannel.1" && e.Tuple.Dport == 7070
			})
			if len(rx) == 0 {
				t.Errorf("decapsulated packet not seen on n2/flannel.1:\n%s", dump(events))
			}
		})
	}
}

// A SYN to a listener whose accept queue is full is reported by the syn
// point with the queue numbers.
func TestSYNAcceptQueueFull(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, client, "c0", "10.98.3.1/24", server, "s0", "10.98.3.2/24")
	// backlog 1, never accepted: the queue holds 2 (the kernel drops when
	// the length exceeds the backlog), the next SYNs are dropped.
	listen(t, server, "10.98.3.2:8443", 1, false)
	w := startWatch(t, "--netns", client, "--netns", server, "port 8443")
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dial(t, client, "", "10.98.3.2:8443", 1500*time.Millisecond)
		}()
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	events := w.stop(t).events

	syns := find(events, func(e output.JSONEvent) bool { return e.Point == "syn" && e.SYN.Dropped })
	if len(syns) == 0 {
		t.Fatalf("no dropped SYN reported:\n%s", dump(events))
	}
	s := syns[0]
	if s.SYN.Outcome != "dropped: accept queue full" || s.SYN.Listener != "10.98.3.2:8443" || s.Netns != server {
		t.Errorf("syn event: %+v in %s", s.SYN, s.Netns)
	}
	if s.SYN.AcceptMax != 1 || s.SYN.AcceptQueue < 2 {
		t.Errorf("queue numbers %d/%d, want >=2/1", s.SYN.AcceptQueue, s.SYN.AcceptMax)
	}
}

// A listener whose SYN-ACKs cost tens of milliseconds in netfilter after
// the NAT hooks, as a ruleset of thousands of Services does on a busy node
// (and as a virtual CPU the host deschedules does): each SYN is consumed
// that long after its answer left. Every SYN is still queued, never a
// drop: the syn point knows a SYN's SYN-ACK by the sequence number it
// acknowledges, not by how soon it came (within the second that keeps
// out the listener's own retransmission: syn.h's SYNACK_WINDOW_NS).
//
// The ruleset costs a connection about 20 ms on our machines and 0.1-0.5 s
// in a TCG guest (the other guest running beside it), inside that second.
// A guest's first connection through it once took 2.6 s and its SYN-ACK
// was sent twice: one connection before the watch starts takes that first
// cost, and a SYN-ACK sent again crosses the ruleset again, so its counter
// is at least one per connection, not exactly.
func TestSYNAnsweredAfterASlowOutput(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, client, "c0", "10.98.60.1/24", server, "s0", "10.98.60.2/24")
	rules := filepath.Join(t.TempDir(), "slow.nft")
	if err := os.WriteFile(rules, []byte(slowSYNACKRuleset(100)), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, "ip", "netns", "exec", server, "nft", "-f", rules)
	listen(t, server, "10.98.60.2:8443", 0, true)
	if err := dial(t, client, "", "10.98.60.2:8443", lab.Patience); err != nil {
		t.Fatalf("connect before the watch: %v", err)
	}
	crossed := func() int {
		out := sh(t, "ip", "netns", "exec", server, "nft", "list", "chain", "inet", "ntslow", "out")
		m := regexp.MustCompile(`counter packets (\d+) `).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no counter in the costly ruleset:\n%s", out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	before := crossed()
	w := startWatch(t, "--netns", client, "--netns", server, "port 8443")
	const conns = 5
	for i := 0; i < conns; i++ {
		start := time.Now()
		if err := dial(t, client, "", "10.98.60.2:8443", lab.Patience); err != nil {
			t.Fatalf("connect %d: %v", i, err)
		}
		t.Logf("connect %d: %s", i, time.Since(start).Round(time.Millisecond))
	}
	tr := w.stop(t)
	if n := crossed() - before; n < conns {
		t.Fatalf("%d SYN-ACKs crossed the costly ruleset for %d connections", n, conns)
	}
	syns := find(tr.events, func(e output.JSONEvent) bool { return e.Point == "syn" })
	if len(syns) != conns {
		t.Errorf("%d syn events for %d connections:\n%s", len(syns), conns, dump(syns))
	}
	for _, s := range syns {
		if s.SYN.Outcome != "queued" {
			t.Errorf("a SYN the listener answered reported %q:\n%s", s.SYN.Outcome, dump([]output.JSONEvent{s}))
		}
	}
	for _, x := range tr.explanations {
		t.Errorf("a finding on connections that all succeeded: %s: %s", x.Rule, x.Summary)
	}
}

// slowSYNACKRuleset is an nftables table whose output chain sends each
// SYN-ACK through n^3 rules (three levels of n jumps), after the NAT
// hooks (filter priority).
func slowSYNACKRuleset(n int) string {
	var b strings.Builder
	chain := func(name, rule string) {
		fmt.Fprintf(&b, " chain %s {\n", name)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "  %s\n", rule)
		}
		b.WriteString(" }\n")
	}
	b.WriteString("table inet ntslow {\n")
	chain("l3", "meta mark 0x4e54")
	chain("l2", "jump l3")
	chain("l1", "jump l2")
	b.WriteString(" chain out {\n  type filter hook output priority 0; policy accept;\n" +
		"  tcp flags & (syn | ack) == syn | ack counter jump l1\n }\n}\n")
	return b.String()
}

// A SYN that finds the SYN queue full: the listener (backlog 1) holds
// requests whose handshakes never complete (the server's netfilter drops
// the client's segments after the SYN). Syncookies off, a SYN is dropped
// for the full SYN queue; on (the kernel's default), it is answered with a
// syncookie, which is no drop.
func TestSYNQueueFull(t *testing.T) {
	for i, c := range []struct {
		syncookies, outcome string
		dropped             bool
	}{
		{"0", "dropped: SYN queue full", true},
		{"1", "answered with a syncookie (SYN queue full)", false},
	} {
		// tcp_syncookies is IPv4's sysctl and IPv6's alike.
		for _, fam := range []struct{ name, iptables, client, server, prefix string }{
			{"IPv4", "iptables", fmt.Sprintf("10.98.%d.1", 30+i), fmt.Sprintf("10.98.%d.2", 30+i), "/24"},
			{"IPv6", "ip6tables", fmt.Sprintf("fd00:98:%d::1", 30+i), fmt.Sprintf("fd00:98:%d::2", 30+i), "/64 nodad"},
		} {
			t.Run(fam.name+"/syncookies="+c.syncookies, func(t *testing.T) {
				client, server := newNetns(t, "cli"), newNetns(t, "srv")
				listener := net.JoinHostPort(fam.server, "8443")
				veth(t, client, "c0", fam.client+fam.prefix, server, "s0", fam.server+fam.prefix)
				script(t,
					"ip netns exec "+server+" sysctl -qw net.ipv4.tcp_syncookies="+c.syncookies,
					"ip netns exec "+server+" "+fam.iptables+" -A INPUT -p tcp --dport 8443 --tcp-flags SYN NONE -j DROP")
				listen(t, server, listener, 1, false)
				w := startWatch(t, "--netns", client, "--netns", server, "port 8443")
				// The first connection's request stays in the SYN queue. The
				// queue is full at the backlog (6.1) or past it (6.18): the
				// second or the third connection's SYN finds it full.
				if err := dial(t, client, "", listener, time.Second); err != nil {
					t.Fatalf("the first connection got no SYN-ACK: %v", err)
				}
				for range 2 {
					dial(t, client, "", listener, 1500*time.Millisecond)
				}
				events := w.stop(t).events

				syns := find(events, func(e output.JSONEvent) bool { return e.Point == "syn" && e.SYN.Outcome != "queued" })
				if len(syns) == 0 {
					t.Fatalf("no SYN reported with the SYN queue full:\n%s", dump(events))
				}
				for _, s := range syns {
					if s.SYN.Outcome != c.outcome || s.SYN.Dropped != c.dropped || s.SYN.Listener != listener ||
						s.Netns != server || s.SYN.SYNQueue < 1 || s.SYN.AcceptMax != 1 {
						t.Errorf("syn event %+v in %s, want %q (dropped %v) with 1 request queued, backlog 1", s.SYN, s.Netns, c.outcome, c.dropped)
					}
				}
			})
		}
	}
}

// nettrace is started on a node already in trouble: the accept queue
// filled before it attached, so it never saw the listener answer anyone.
// The SYNs dropped next are still reported with the listener's queues
// (from sock_diag where the kernel program could not know the listener).
func TestSYNAcceptQueueFullBeforeTheStart(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, client, "c0", "10.98.4.1/24", server, "s0", "10.98.4.2/24")
	listen(t, server, "10.98.4.2:8443", 1, false)
	for i := 0; i < 2; i++ {
		if err := dial(t, client, "", "10.98.4.2:8443", time.Second); err != nil {
			t.Fatalf("filling the accept queue: %v", err)
		}
	}
	w := startWatch(t, "--netns", client, "--netns", server, "port 8443")
	dial(t, client, "", "10.98.4.2:8443", 1500*time.Millisecond)
	events := w.stop(t).events

	syns := find(events, func(e output.JSONEvent) bool { return e.Point == "syn" && e.SYN.Dropped })
	if len(syns) == 0 {
		t.Fatalf("no dropped SYN reported:\n%s", dump(events))
	}
	for _, s := range syns {
		if s.SYN.Outcome != "dropped: accept queue full" || s.SYN.Listener != "10.98.4.2:8443" || s.Netns != server ||
			s.SYN.AcceptMax != 1 || s.SYN.AcceptQueue < 2 {
			t.Errorf("syn event %+v in %s, want accept queue full (2/1) at 10.98.4.2:8443 in %s", s.SYN, s.Netns, server)
		}
	}
}

// A listener resets segments no connection owns (here ACKs from two ports
// that never connected) with its own socket: each reset stays in the flow
// of the segment it answers, and the listener joins no two connections.
func TestListenerResetsStayApart(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, client, "c0", "10.98.40.1/24", server, "s0", "10.98.40.2/24")
	listen(t, server, "10.98.40.2:8443", 8, true)
	w := startWatch(t, "--netns", client, "--netns", server, "port 8443")
	ports := []uint16{41001, 41002}
	for _, port := range ports {
		sendStrayACK(t, client, "10.98.40.1", "10.98.40.2", port, 8443)
	}
	w.await(t, "resets sent by the listener", len(ports), func(e output.JSONEvent) bool {
		return e.Point == "tcp" && e.Kind == "rst-sent" && e.Netns == server
	})
	tr := w.stop(t)

	resets := find(tr.events, func(e output.JSONEvent) bool {
		return e.Point == "tcp" && e.Kind == "rst-sent" && e.Netns == server
	})
	if len(resets) != len(ports) {
		t.Fatalf("%d resets sent by the listener, want %d:\n%s", len(resets), len(ports), dump(tr.events))
	}
	for _, f := range tr.flows {
		seen := map[uint16]bool{}
		for _, p := range f.Packets {
			for _, s := range p.Steps {
				if s.Tuple == nil {
					continue
				}
				for _, port := range ports {
					if s.Tuple.Sport == port || s.Tuple.Dport == port {
						seen[port] = true
					}
				}
			}
		}
		if len(seen) > 1 {
			t.Errorf("flow %d holds the segments of two client ports:\n%s", f.ID, dump([]output.JSONFlow{f}))
		}
	}
}

// sendStrayACK sends, from a raw socket in ns, a TCP ACK that belongs to
// no connection.
func sendStrayACK(t *testing.T, ns, src, dst string, sport, dport uint16) {
	t.Helper()
	ip := &layers.IPv4{SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4(), Protocol: layers.IPProtocolTCP}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: 1000, Ack: 2000, ACK: true, Window: 1024}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, tcp); err != nil {
		t.Fatal(err)
	}
	inNetns(t, ns, func() error {
		c, err := net.ListenPacket("ip4:tcp", src)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer c.Close()
		_, err = c.WriteTo(buf.Bytes(), &net.IPAddr{IP: ip.DstIP})
		return err
	})
}

// requireJourneys fails unless the kernel sent a packet's steps gathered:
// after MASQUERADE the SYN leaves the client, enters the server and
// crosses its NAT hooks, one record.
func requireJourneys(t *testing.T, tr trace) {
	t.Helper()
	records, _ := tr.summary["kernel_records"].(float64)
	var events float64
	for _, n := range tr.summary["events"].(map[string]any) {
		events += n.(float64)
	}
	if records == 0 || records >= events {
		t.Errorf("%v events came in %v kernel records: no packet's steps were gathered into one", events, records)
	}
	t.Logf("%v events in %v kernel records", events, records)
}
