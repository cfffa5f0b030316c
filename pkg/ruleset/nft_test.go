package ruleset

import (
	"os"
	"strings"
	"testing"
)

// kubeProxyNative is kube-proxy's nftables table as nft -a -s lists it.
const kubeProxyNative = `table ip kube-proxy { # handle 3
	comment "rules for kube-proxy"
	map service-ips { # handle 4
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.20 . tcp . 80 : goto service-ABC-default/paths/tcp/http,
			     10.96.0.40 . tcp . 443 : goto service-DEF-default/ingress/tcp/https }
	}
	chain nat-prerouting { # handle 5
		type nat hook prerouting priority dstnat; policy accept;
		jump services # handle 10
	}
	chain services { # handle 6
		ip daddr . meta l4proto . th dport vmap @service-ips # handle 11
	}
	chain service-ABC-default/paths/tcp/http { # handle 7
		ip daddr 10.96.0.20 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade # handle 12
		numgen random mod 2 vmap { 0 : goto endpoint-A, 1 : goto endpoint-B } # handle 13
	}
	chain endpoint-A { # handle 8
		ip saddr 10.244.1.10 jump mark-for-masquerade # handle 14
		meta l4proto tcp dnat to 10.244.1.10:8080 comment "default/paths" # handle 15
	}
	chain masquerading { # handle 9
		meta mark & 0x00004000 == 0x00000000 return # handle 16
		masquerade fully-random # handle 17
	}
}
table inet other { # handle 20
	chain c { # handle 21
		drop # handle 22
	}
}
`

func TestParseNative(t *testing.T) {
	n := ParseNative(kubeProxyNative)
	for _, tc := range []struct {
		chain    string
		handle   uint64
		position int
		target   string
		comment  string
	}{
		{"nat-prerouting", 10, 1, "", ""},
		{"services", 11, 1, "", ""},
		{"service-ABC-default/paths/tcp/http", 13, 2, "", ""},
		{"endpoint-A", 15, 2, "DNAT", "default/paths"},
		{"masquerading", 16, 1, "RETURN", ""},
		{"masquerading", 17, 2, "MASQUERADE", ""},
	} {
		r := n.Rule("kube-proxy", tc.chain, tc.handle)
		if r == nil {
			t.Errorf("%s handle %d: not found", tc.chain, tc.handle)
			continue
		}
		if r.Position != tc.position || r.Target != tc.target || r.Comment != tc.comment || r.Chain != tc.chain || r.Table != "kube-proxy" {
			t.Errorf("%s handle %d: %+v", tc.chain, tc.handle, r)
		}
	}
	if r := n.Rule("other", "c", 22); r != nil {
		t.Errorf("a rule of an inet table: %+v", r)
	}
	if r := n.Rule("kube-proxy", "services", 4); r != nil {
		t.Errorf("a map as a rule: %+v", r)
	}
}

// loadWithNative reads a lab node's iptables-save text and its native
// nftables table (testdata/NAME.rules and NAME.nft), as a snapshot does.
func loadWithNative(t *testing.T, name string) *Ruleset {
	t.Helper()
	text, err := os.ReadFile("testdata/" + name + ".rules")
	if err != nil {
		t.Fatal(err)
	}
	native, err := os.ReadFile("testdata/" + name + ".nft")
	if err != nil {
		t.Fatal(err)
	}
	s := NewSnapshot(1, 0, string(text), "", string(native))
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	return s.Ruleset
}

// TestNativeNAT: kube-proxy's nftables mode is walked as iptables rules
// are: the verdict map to the Service's chain, numgen's choice settled by
// the endpoint the kernel chose, the endpoint's DNAT named as nft lists
// it.
func TestNativeNAT(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		hook        string
		pre, post   Packet
		table, text string
		via         []string
		assumed     int
	}{
		{
			name: "a ClusterIP's endpoint, chosen by numgen", rules: "service-paths-nft-n1", hook: "OUTPUT",
			pre: pkt("172.20.0.1:40000", "10.96.0.20:80", "", ""), post: pkt("172.20.0.1:40000", "10.244.2.10:8080", "", ""),
			table: "kube-proxy", text: `meta l4proto tcp dnat to 10.244.2.10:8080 comment "default/paths/tcp/80"`,
			// A goto replaces the chain it leaves, as -g does: the jumps
			// before it are not on the way back.
			via:     []string{"numgen random mod 2 vmap"},
			assumed: 1,
		},
		{
			name: "the load balancer under externalTrafficPolicy: Local, straight to the endpoint", rules: "hairpin-nft-n1", hook: "PREROUTING",
			pre: pkt("10.244.1.10:40000", "172.20.0.100:443", "cni0", ""), post: pkt("10.244.1.10:40000", "10.244.1.20:443", "cni0", ""),
			table: "kube-proxy", text: `meta l4proto tcp dnat to 10.244.1.20:443 comment "default/ingress/tcp/443"`,
			via: []string{"goto endpoint-"},
		},
		{
			name: "not translated at POSTROUTING: iptables' nat table first", rules: "hairpin-nft-n1", hook: "POSTROUTING",
			pre: pkt("10.244.1.10:40000", "10.244.1.20:443", "", "cni0"), post: pkt("10.244.1.10:40000", "10.244.1.20:443", "", "cni0"),
			table: "nat", text: `-A POSTROUTING -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j RETURN`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := loadWithNative(t, tc.rules).NAT(tc.hook, tc.pre, tc.post)
			if a == nil || a.Rule == nil {
				t.Fatalf("attribution %+v", a)
			}
			if a.Table != tc.table || a.Rule.Text != tc.text || len(a.Assumed) != tc.assumed {
				t.Errorf("%s %q (%d assumed), want %s %q (%d)", a.Table, a.Rule.Text, len(a.Assumed), tc.table, tc.text, tc.assumed)
			}
			if len(a.Via) != len(tc.via) {
				t.Fatalf("via %d rules, want %d: %+v", len(a.Via), len(tc.via), a.Via)
			}
			for i, v := range a.Via {
				if !strings.HasPrefix(v.Text, tc.via[i]) {
					t.Errorf("via %d: %q, want %q...", i, v.Text, tc.via[i])
				}
			}
		})
	}
}

// TestNativeDrop: kube-proxy's nftables mode rejects a new connection to
// a Service without endpoints in its filter chains, through the element of
// its no-endpoint-services map that names the Service in a comment; the
// reject is named, reached by that element.
func TestNativeDrop(t *testing.T) {
	rs := loadWithNative(t, "no-endpoints-nft-n1")
	a := rs.Drop("OUTPUT", pkt("10.98.5.1:40000", "10.96.0.50:80", "", "n0"))
	if a == nil || a.Rule == nil {
		t.Fatalf("attribution %+v", a)
	}
	if a.Table != "kube-proxy" || a.Rule.Chain != "reject-chain" || a.Rule.Target != "REJECT" {
		t.Errorf("named %s %s %q (%s)", a.Table, a.Rule.Chain, a.Rule.Text, a.Rule.Target)
	}
	const element = `ip daddr . meta l4proto . th dport vmap @no-endpoint-services, element 10.96.0.50 . tcp . 80 comment "default/web:80" : goto reject-chain`
	// The element's goto replaced the chain the filter chain jumped to.
	if len(a.Via) != 1 || a.Via[0].Text != element || a.Via[0].Comment != "default/web:80" {
		t.Errorf("via %+v, want %q", a.Via, element)
	}
	if b := rs.Drop("OUTPUT", pkt("10.98.5.1:40000", "10.96.0.51:80", "", "n0")); b != nil {
		t.Errorf("a drop attributed for another address: %+v", b.Rule)
	}
}
