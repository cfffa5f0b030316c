package ruleset

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// kubeProxyRules is a kube-proxy (iptables mode) nat table with services
// Services of two endpoints each, as on a large cluster.
func kubeProxyRules(services int) string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	b.WriteString(":KUBE-SERVICES - [0:0]\n:KUBE-POSTROUTING - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n")
	var rules strings.Builder
	rules.WriteString("-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n")
	rules.WriteString("-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n")
	rules.WriteString("-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n")
	rules.WriteString("-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\n")
	rules.WriteString("-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n")
	rules.WriteString("-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0\n")
	rules.WriteString("-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n")
	for s := 0; s < services; s++ {
		svc := fmt.Sprintf("KUBE-SVC-%016d", s)
		fmt.Fprintf(&b, ":%s - [0:0]\n", svc)
		vip := fmt.Sprintf("10.96.%d.%d", s/256, s%256)
		fmt.Fprintf(&rules, "-A KUBE-SERVICES -d %s/32 -p tcp -m comment --comment \"ns/svc%d:http cluster IP\" -m tcp --dport 80 -j %s\n", vip, s, svc)
		for e := 0; e < 2; e++ {
			sep := fmt.Sprintf("KUBE-SEP-%014d%02d", s, e)
			fmt.Fprintf(&b, ":%s - [0:0]\n", sep)
			ep := fmt.Sprintf("10.244.%d.%d", (2*s+e)/256%256, (2*s+e)%256)
			if e == 0 {
				fmt.Fprintf(&rules, "-A %s -m comment --comment \"ns/svc%d:http -> %s:8080\" -m statistic --mode random --probability 0.50000000000 -j %s\n", svc, s, ep, sep)
			} else {
				fmt.Fprintf(&rules, "-A %s -m comment --comment \"ns/svc%d:http -> %s:8080\" -j %s\n", svc, s, ep, sep)
			}
			fmt.Fprintf(&rules, "-A %s -s %s/32 -m comment --comment \"ns/svc%d:http\" -j KUBE-MARK-MASQ\n", sep, ep, s)
			fmt.Fprintf(&rules, "-A %s -p tcp -m comment --comment \"ns/svc%d:http\" -m tcp -j DNAT --to-destination %s:8080\n", sep, s, ep)
		}
	}
	return b.String() + rules.String() + "COMMIT\n"
}

const largeServices = 5000

// BenchmarkParseLarge parses a 5,000-Service kube-proxy nat table (25k
// rules).
func BenchmarkParseLarge(b *testing.B) {
	text := kubeProxyRules(largeServices)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(text); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNATLarge attributes the DNAT of the last Service (to its
// second endpoint: the random choice tried both ways) in that table.
func BenchmarkNATLarge(b *testing.B) {
	rs, err := Parse(kubeProxyRules(largeServices))
	if err != nil {
		b.Fatal(err)
	}
	s := largeServices - 1
	vip := netip.MustParseAddr(fmt.Sprintf("10.96.%d.%d", s/256, s%256))
	ep := netip.MustParseAddr(fmt.Sprintf("10.244.%d.%d", (2*s+1)/256%256, (2*s+1)%256))
	client := netip.MustParseAddr("172.20.0.1")
	pre := Packet{Src: client, Dst: vip, Proto: 6, Sport: 40000, Dport: 80}
	post := pre
	post.Dst, post.Dport = ep, 8080
	b.ReportAllocs()
	for b.Loop() {
		a := rs.NAT("OUTPUT", pre, post)
		if a == nil || a.Rule.ToDestination != ep.String()+":8080" {
			b.Fatalf("attributed to %v", a)
		}
	}
}
