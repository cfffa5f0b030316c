package lab

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/netns"
)

// stale-udp-entry's addresses: the DNS Service's ClusterIP, and the
// endpoint that goes, a pod on node 2 (p2 takes over).
const (
	DNSServiceIP = "10.96.0.43"
	OldDNSPodIP  = "10.244.2.20"
	DNSPort      = 53
)

// dnsRules is node 1's nat table with the DNS Service (UDP) DNATed to
// to, as kube-proxy writes it.
func dnsRules(f Family, to string) string {
	t := nodeBase(f, 0)
	service{name: "dns", proto: "udp", clusterIP: DNSServiceIP, port: fmt.Sprint(DNSPort),
		endpoints: []endpoint{{to, fmt.Sprint(DNSPort)}}}.write(&t)
	kubeProxyNodePorts(&t)
	return t.String()
}

// 10. Pod p1 queries a DNS Service every half second from one UDP socket,
// as a resolver does; its endpoint, pod dns-old on node 2, answers. Then
// the endpoint changes: kube-proxy's rules on node 1 choose p2 instead and
// dns-old goes (its network deleted through CNI, as the runtime does). The conntrack entry of p1's socket stays
// (kubernetes#59368, #126130: kube-proxy's cleanup failed), so p1's
// queries are DNATed to dns-old's address, unanswered. In the healthy twin
// the entry is deleted with the change, as kube-proxy does (through
// netlink, as kube-proxy 1.31 does), and the next query crosses the new
// rules to p2.
func staleUDPEntry(healthy bool, f Family) *Scenario {
	old := Pod{"dns-old", 2, OldDNSPodIP, "fd00:10:244:2::20"}
	change := func() error {
		if err := iptablesRestore(f, NsNode1, dnsRules(f, f.Pod2)); err != nil {
			return err
		}
		if healthy {
			if err := deleteUDPEntries(NsNode1, DNSServiceIP, OldDNSPodIP); err != nil {
				return err
			}
		}
		return deletePod(old)
	}
	return &Scenario{
		Description: fmt.Sprintf("pod p1 queries ClusterIP %s (UDP) every half second; its endpoint %s on node 2 goes and p2 takes over, but the conntrack entry of p1's socket stays",
			f.HostPort(DNSServiceIP, DNSPort), OldDNSPodIP),
		Pods:    withPods(old),
		Servers: []Server{{Pod: old.Name, Port: DNSPort, UDP: true}, {Pod: "p2", Port: DNSPort, UDP: true}},
		Rules:   map[string]string{NsNode1: dnsRules(f, OldDNSPodIP), NsNode2: nodeRules(f, 1)},
		Clients: []Client{{Namespace: Prefix + "p1", Target: f.HostPort(DNSServiceIP, DNSPort), Count: 24,
			Timeout: 500 * time.Millisecond, UDP: true, Midway: change}},
	}
}

// deleteUDPEntries deletes namespace ns's UDP conntrack entries from
// clients of service that it DNATed to endpoint, as kube-proxy does when
// the endpoint goes; it fails when there were none.
func deleteUDPEntries(ns, service, endpoint string) error {
	return netns.Do(nsPath(ns), func() error {
		filter := &netlink.ConntrackFilter{}
		if err := filter.AddIP(netlink.ConntrackOrigDstIP, net.ParseIP(service)); err != nil {
			return err
		}
		if err := filter.AddIP(netlink.ConntrackReplySrcIP, net.ParseIP(endpoint)); err != nil {
			return err
		}
		if err := filter.AddProtocol(unix.IPPROTO_UDP); err != nil {
			return err
		}
		n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filter)
		if err != nil {
			return fmt.Errorf("delete conntrack entries in %s: %w", ns, err)
		}
		if n == 0 {
			return fmt.Errorf("no UDP conntrack entry in %s to %s DNATed to %s", ns, service, endpoint)
		}
		return nil
	})
}

// exchange sends a UDP client's datagrams from one socket, one at a time
// and c.Timeout apart, each awaiting its answer for as long; Midway runs
// before the second half.
func exchange(c Client) ([]Outcome, error) {
	var conn net.Conn
	err := netns.Do(nsPath(c.Namespace), func() error {
		var err error
		conn, err = net.Dial("udp", c.Target)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("UDP client in %s: %w", c.Namespace, err)
	}
	defer conn.Close()
	out := make([]Outcome, 0, c.Count)
	buf := make([]byte, 512)
	for i := 0; i < c.Count; i++ {
		if i == c.Count/2 && c.Midway != nil {
			if err := c.Midway(); err != nil {
				return nil, fmt.Errorf("midway through %s's datagrams: %w", c.Namespace, err)
			}
		}
		o := Outcome{From: c.Namespace, Target: c.Target}
		start := time.Now()
		conn.SetDeadline(start.Add(c.Timeout))
		if _, err := conn.Write([]byte("query\n")); err != nil {
			return nil, fmt.Errorf("UDP client in %s: %w", c.Namespace, err)
		}
		n, rerr := conn.Read(buf)
		o.Result, o.Elapsed = classify(rerr), time.Since(start)
		if rerr != nil {
			o.Err = rerr.Error()
		} else {
			o.Result, o.ServedBy = Answered, strings.TrimSpace(string(buf[:n]))
			// Answered: wait out the rest of the period before the next.
			time.Sleep(c.Timeout - o.Elapsed)
		}
		out = append(out, o)
	}
	return out, nil
}

// ServeUDP answers every datagram to addr with name and a newline, as a
// DNS server answers each query. It runs until killed.
func ServeUDP(addr, name, readyFile string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	if readyFile != "" {
		if err := os.WriteFile(readyFile, nil, 0o644); err != nil {
			return err
		}
	}
	buf := make([]byte, 512)
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		pc.WriteTo([]byte(name+"\n"), from)
	}
}
