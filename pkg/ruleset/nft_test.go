package ruleset

import "testing"

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
