package ruleset

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// The rulesets under testdata are iptables-save output of the lab's nodes
// (test/lab), taken with iptables-nft. snat-missing-n1 is incident 1's node
// as the lab wrote flannel before v0.20 (its rules in POSTROUTING itself, as
// in the incident's write-up); snat-missing-chain-n1 as it writes flannel
// now, in its own chain FLANNEL-POSTRTG. snat-missing-flanneld-n1 is a node
// of test/flannel_test.go: the chain as flanneld v0.28.10 itself wrote it
// (no kube-proxy KUBE-POSTROUTING before it), the stale RETURN for the
// other node's lease and one Service's rules.
func load(t *testing.T, name string, edit ...string) *Ruleset {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".rules")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for i := 0; i+1 < len(edit); i += 2 {
		if !strings.Contains(text, edit[i]) {
			t.Fatalf("%s has no %q", name, edit[i])
		}
		text = strings.Replace(text, edit[i], edit[i+1], 1)
	}
	rs, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func pkt(src, dst string, in, out string) Packet {
	s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
	return Packet{Src: s.Addr(), Dst: d.Addr(), Sport: s.Port(), Dport: d.Port(), Proto: 6, In: in, Out: out}
}

// ref names a rule as "chain position".
func ref(r *Rule) string {
	if r == nil {
		return "policy"
	}
	return r.Chain + " " + itoa(r.Position)
}

func itoa(n int) string { return fmt.Sprintf("%02d", n) }

func refs(rs []*Rule) string {
	var out []string
	for _, r := range rs {
		out = append(out, ref(r))
	}
	return strings.Join(out, " > ")
}

// attributedTo requires a to name the rule want ("chain position" or
// "policy"), or nothing when want is empty; false when nothing more is to
// be checked.
func attributedTo(t *testing.T, a *Attribution, want string) bool {
	t.Helper()
	if want == "" {
		if a != nil {
			t.Fatalf("attributed to %s, want nothing", ref(a.Rule))
		}
		return false
	}
	if a == nil {
		t.Fatal("not attributed")
	}
	if got := ref(a.Rule); got != want {
		t.Errorf("rule %s, want %s (%v)", got, want, a.Rule)
	}
	return true
}

const staleReturn = "-A POSTROUTING ! -s 10.244.0.0/16 -d 10.244.2.0/24 -m comment --comment \"flanneld masq\" -j RETURN\n"

const staleChainReturn = "-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.2.0/24 -m comment --comment \"flanneld masq\" -j RETURN\n"

const flanneldStaleReturn = "-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.28.0/24 -m comment --comment \"flanneld masq\" -j RETURN\n"

func TestNAT(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		edit        []string
		hook        string
		pre, post   Packet
		rule, via   string
		skipped     string
		assumed     int
	}{
		{
			name: "snat-missing: the stale flannel RETURN ends POSTROUTING before the MASQUERADE", rules: "snat-missing-n1",
			hook: "POSTROUTING",
			pre:  pkt("172.20.0.1:40000", "10.244.2.10:8080", "", "flannel.1"), post: pkt("172.20.0.1:40000", "10.244.2.10:8080", "", "flannel.1"),
			rule: "POSTROUTING 04", skipped: "POSTROUTING 06", assumed: 1,
		},
		{
			name: "snat-missing healthy: the MASQUERADE", rules: "snat-missing-n1", edit: []string{staleReturn, ""},
			hook: "POSTROUTING",
			pre:  pkt("172.20.0.1:40000", "10.244.2.10:8080", "", "flannel.1"), post: pkt("10.244.1.0:40000", "10.244.2.10:8080", "", "flannel.1"),
			rule: "POSTROUTING 05", assumed: 1,
		},
		{
			name: "snat-missing, flannel's own chain: its stale RETURN, reached by POSTROUTING's jump, before its MASQUERADE", rules: "snat-missing-chain-n1",
			hook: "POSTROUTING",
			pre:  pkt("172.20.0.1:40000", "10.244.2.10:8080", "", "flannel.1"), post: pkt("172.20.0.1:40000", "10.244.2.10:8080", "", "flannel.1"),
			rule: "FLANNEL-POSTRTG 04", via: "POSTROUTING 02", skipped: "FLANNEL-POSTRTG 07", assumed: 1,
		},
		{
			name: "snat-missing healthy, flannel's own chain: its MASQUERADE", rules: "snat-missing-chain-n1", edit: []string{staleChainReturn, ""},
			hook: "POSTROUTING",
			pre:  pkt("172.20.0.1:40000", "10.244.2.10:8080", "", "flannel.1"), post: pkt("10.244.1.0:40000", "10.244.2.10:8080", "", "flannel.1"),
			rule: "FLANNEL-POSTRTG 06", via: "POSTROUTING 02", assumed: 1,
		},
		{
			name: "pod to pod, flannel's own chain: its RETURN for the node's pods", rules: "snat-missing-chain-n1",
			hook: "POSTROUTING",
			pre:  pkt("10.244.1.10:40000", "10.244.2.10:8080", "", "flannel.1"), post: pkt("10.244.1.10:40000", "10.244.2.10:8080", "", "flannel.1"),
			rule: "FLANNEL-POSTRTG 02", via: "POSTROUTING 02", skipped: "FLANNEL-POSTRTG 06", assumed: 1,
		},
		{
			name: "snat-missing, flanneld's own ruleset: nothing marked the packet, so not its mark RETURN but the stale one", rules: "snat-missing-flanneld-n1",
			hook: "POSTROUTING",
			pre:  pkt("172.30.250.1:40000", "10.244.28.2:8080", "", "flannel.1"), post: pkt("172.30.250.1:40000", "10.244.28.2:8080", "", "flannel.1"),
			rule: "FLANNEL-POSTRTG 04", via: "POSTROUTING 01", skipped: "FLANNEL-POSTRTG 07", assumed: 1,
		},
		{
			name: "snat-missing healthy, flanneld's own ruleset: its MASQUERADE", rules: "snat-missing-flanneld-n1", edit: []string{flanneldStaleReturn, ""},
			hook: "POSTROUTING",
			pre:  pkt("172.30.250.1:40000", "10.244.28.2:8080", "", "flannel.1"), post: pkt("10.244.55.0:40000", "10.244.28.2:8080", "", "flannel.1"),
			rule: "FLANNEL-POSTRTG 06", via: "POSTROUTING 01", assumed: 1,
		},
		{
			name: "the Service DNAT, through KUBE-SERVICES and KUBE-SVC", rules: "snat-missing-n1",
			hook: "OUTPUT",
			pre:  pkt("172.20.0.1:40000", "10.96.0.10:80", "", ""), post: pkt("172.20.0.1:40000", "10.244.2.10:8080", "", ""),
			rule: "KUBE-SEP-SLU7GZY5SPD3QPRN 02", via: "OUTPUT 01 > KUBE-SERVICES 02 > KUBE-SVC-JNPFP5XLF5BLSA43 01",
		},
		{
			name: "a Service's random choice, resolved by the endpoint the kernel chose", rules: "service-paths-healthy-n1",
			hook: "OUTPUT",
			pre:  pkt("172.20.0.1:40000", "10.96.0.20:80", "", ""), post: pkt("172.20.0.1:40000", "10.244.2.10:8080", "", ""),
			rule: "KUBE-SEP-XZ4UAKWMPUHAATXW 02", via: "OUTPUT 01 > KUBE-SERVICES 02 > KUBE-SVC-KBG327VJT2AS74PP 03",
			assumed: 1, // the 50% statistic rule toward the other endpoint did not match
		},
		{
			name: "stale hostPort: the first CNI-DN chain DNATs to the dead pod", rules: "stale-hostport-n1",
			hook: "PREROUTING",
			pre:  pkt("172.20.0.254:41000", "172.20.0.1:8443", "eth0", ""), post: pkt("172.20.0.254:41000", "10.244.1.36:8443", "eth0", ""),
			// The DNAT keeps the port unless told: 8443 is not what the rule chose.
			rule: "",
		},
		{
			name: "stale hostPort, as the kernel translated it", rules: "stale-hostport-n1",
			hook: "PREROUTING",
			pre:  pkt("172.20.0.254:41000", "172.20.0.1:8443", "eth0", ""), post: pkt("172.20.0.254:41000", "10.244.1.36:443", "eth0", ""),
			rule: "CNI-DN-093e6edd5ba1d6052a1ee 03", via: "PREROUTING 02 > CNI-HOSTPORT-DNAT 01", assumed: 1,
		},
		{
			name: "live hostPort once the stale chain is gone", rules: "stale-hostport-n1",
			edit: []string{"-j CNI-DN-093e6edd5ba1d6052a1ee\n", "-j CNI-DN-093e6edd5ba1d6052a1ee-GONE\n"},
			hook: "PREROUTING",
			pre:  pkt("172.20.0.254:41000", "172.20.0.1:8443", "eth0", ""), post: pkt("172.20.0.254:41000", "10.244.1.34:443", "eth0", ""),
			rule: "CNI-DN-deb6904d86bc61d55c4e6 03", via: "PREROUTING 02 > CNI-HOSTPORT-DNAT 02", assumed: 1,
		},
		{
			name: "hairpin: the load balancer DNAT skips KUBE-MARK-MASQ", rules: "hairpin-n1",
			hook: "PREROUTING",
			pre:  pkt("10.244.1.10:40000", "172.20.0.100:443", "cni0", ""), post: pkt("10.244.1.10:40000", "10.244.1.20:443", "cni0", ""),
			rule: "KUBE-SEP-K64J3NQ7WOFVDNR4 02", via: "PREROUTING 01 > KUBE-SERVICES 03 > KUBE-EXT-JB5AVGRZAOG6S5T3 01 > KUBE-SVL-JB5AVGRZAOG6S5T3 01",
		},
		{
			name: "no rule for the tuple: the chain's policy", rules: "snat-missing-n1",
			hook: "PREROUTING",
			pre:  pkt("172.20.0.254:41000", "172.20.0.1:22", "eth0", ""), post: pkt("172.20.0.254:41000", "172.20.0.1:22", "eth0", ""),
			rule: "policy", assumed: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := load(t, tc.rules, tc.edit...)
			a := rs.NAT(tc.hook, tc.pre, tc.post)
			if !attributedTo(t, a, tc.rule) {
				return
			}
			if got := refs(a.Via); got != tc.via {
				t.Errorf("via %q, want %q", got, tc.via)
			}
			got := "none"
			if a.Skipped != nil {
				got = ref(a.Skipped)
			}
			if want := map[bool]string{true: tc.skipped, false: "none"}[tc.skipped != ""]; got != want {
				t.Errorf("skipped %s, want %s", got, want)
			}
			if len(a.Assumed) != tc.assumed {
				t.Errorf("%d assumptions, want %d: %+v", len(a.Assumed), tc.assumed, a.Assumed)
			}
		})
	}
}

func TestOther(t *testing.T) {
	rs := load(t, "stale-hostport-n1")
	pre := pkt("172.20.0.254:41000", "172.20.0.1:8443", "eth0", "")
	a := rs.NAT("PREROUTING", pre, pkt("172.20.0.254:41000", "10.244.1.36:443", "eth0", ""))
	o := rs.Other(a, pre)
	if o == nil || ref(o.Rule) != "CNI-DN-deb6904d86bc61d55c4e6 03" || o.Rule.ToDestination != "10.244.1.34:443" {
		t.Fatalf("other: %+v", o)
	}
	if rs.Other(o, pre).Rule != a.Rule {
		t.Errorf("the live chain's other is not the stale one")
	}
	one := load(t, "snat-missing-n1")
	pre = pkt("172.20.0.1:40000", "10.96.0.10:80", "", "")
	if o := one.Other(one.NAT("OUTPUT", pre, pkt("172.20.0.1:40000", "10.244.2.10:8080", "", "")), pre); o != nil {
		t.Errorf("a Service with one endpoint has another: %v", o.Rule)
	}
}

func TestDNATChoices(t *testing.T) {
	rs := load(t, "service-paths-healthy-n1")
	var got []string
	for _, a := range rs.DNATChoices("PREROUTING", pkt("10.244.1.50:40000", "10.96.0.20:80", "cni0", "")) {
		got = append(got, a.Rule.ToDestination+" via "+refs(a.Via))
	}
	want := []string{"10.244.1.10:8080 via PREROUTING 01 > KUBE-SERVICES 02 > KUBE-SVC-KBG327VJT2AS74PP 02",
		"10.244.2.10:8080 via PREROUTING 01 > KUBE-SERVICES 02 > KUBE-SVC-KBG327VJT2AS74PP 03"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("choices %q, want %q", got, want)
	}
	if c := rs.DNATChoices("PREROUTING", pkt("10.244.1.50:40000", "10.96.0.21:80", "cni0", "")); len(c) != 0 {
		t.Errorf("an address no Service has: %d choices", len(c))
	}
}

func TestDrop(t *testing.T) {
	rs, err := Parse(`*mangle
:INPUT ACCEPT [0:0]
-A INPUT -m mark --mark 0x1 -j DROP
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-NWPLCY - [0:0]
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A INPUT -j KUBE-NWPLCY
-A FORWARD -i cni0 -o cni0 -j ACCEPT
-A KUBE-NWPLCY -s 10.244.1.0/24 -p tcp -m tcp --dport 8080 -m comment --comment "default/deny-web" -j DROP
-A KUBE-NWPLCY -m conntrack --ctstate INVALID -j DROP
COMMIT
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, hook string
		p          Packet
		rule       string
		comment    string
	}{
		{"the policy's DROP, not an earlier table's DROP on a mark not seen", "INPUT", pkt("10.244.1.10:40000", "10.244.1.1:8080", "cni0", ""), "KUBE-NWPLCY 01", "default/deny-web"},
		{"an opaque match resolved by the drop: the first table's", "INPUT", pkt("10.244.2.10:40000", "10.244.1.1:8080", "cni0", ""), "INPUT 01", ""},
		{"the chain's DROP policy", "FORWARD", pkt("10.244.1.10:40000", "10.244.2.10:80", "cni0", "flannel.1"), "policy", ""},
		{"accepted by filter: only the mark rule can have dropped it", "INPUT", pkt("10.244.1.10:40000", "10.244.1.1:22", "cni0", ""), "INPUT 01", ""},
		{"no rule drops it", "OUTPUT", pkt("10.244.1.1:22", "10.244.1.10:40000", "", "cni0"), "", ""},
		{"conntrack said INVALID: the ctstate rule, no assumption", "INPUT", invalid(pkt("10.244.2.10:40000", "10.244.1.1:8080", "cni0", "")), "KUBE-NWPLCY 02", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := rs.Drop(tc.hook, tc.p)
			if !attributedTo(t, a, tc.rule) {
				return
			}
			if a.Rule != nil && a.Rule.Comment != tc.comment {
				t.Errorf("comment %q, want %q", a.Rule.Comment, tc.comment)
			}
		})
	}
}

// invalid is p as conntrack judged it: INVALID.
func invalid(p Packet) Packet {
	p.CTState = "INVALID"
	return p
}

func TestParse(t *testing.T) {
	rs := load(t, "stale-hostport-n1")
	if rs.Source != "iptables-save v1.8.9 (nf_tables)" && rs.Source != "" {
		t.Errorf("source %q", rs.Source)
	}
	r := rs.Tables["nat"].Chains["CNI-HOSTPORT-DNAT"].Rules[0]
	if want := `dnat name: "cbr0" id: "fb7cdb0a4f8da673da0a9818ec9a1576f953a8e8decf87a081827c11e4aa7138"`; r.Comment != want {
		t.Errorf("comment %q, want %q", r.Comment, want)
	}
	if r.Target != "CNI-DN-093e6edd5ba1d6052a1ee" || r.Position != 1 {
		t.Errorf("target %q position %d", r.Target, r.Position)
	}
	for _, bad := range []string{"-A X -s", "*nat\n-A X -d 1.2.3.4/33 -j ACCEPT\nCOMMIT\n", "*nat\n-A X -m comment --comment \"open\nCOMMIT\n", "-A X -j ACCEPT\n"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParse: any text parses or fails cleanly, and attribution over what
// parses ends, whatever the chains (loops, gotos, missing chains).
func FuzzParse(f *testing.F) {
	for _, name := range []string{"snat-missing-n1", "stale-hostport-n1", "hairpin-n1"} {
		b, err := os.ReadFile("testdata/" + name + ".rules")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("*nat\n:PREROUTING ACCEPT [0:0]\n:A - [0:0]\n-A PREROUTING -j A\n-A A -g PREROUTING\nCOMMIT\n")
	f.Fuzz(func(t *testing.T, text string) {
		rs, err := Parse(text)
		if err != nil {
			return
		}
		pre := pkt("172.20.0.254:41000", "172.20.0.1:8443", "eth0", "")
		post := pkt("172.20.0.254:41000", "10.244.1.36:443", "eth0", "")
		for _, hook := range []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"} {
			if a := rs.NAT(hook, pre, post); a != nil {
				rs.Other(a, pre)
			}
			rs.Drop(hook, pre)
		}
	})
}

// TestMarkCarriedBetweenHooks: KUBE-MARK-MASQ, set on the way to the
// Service's DNAT at OUTPUT, decides KUBE-POSTROUTING's MASQUERADE at
// POSTROUTING: no assumption left about the mark.
func TestMarkCarriedBetweenHooks(t *testing.T) {
	rs := load(t, "service-paths-healthy-n1")
	pre := pkt("172.20.0.1:40000", "10.96.0.20:80", "", "")
	dnat := rs.NAT("OUTPUT", pre, pkt("172.20.0.1:40000", "10.244.2.10:8080", "", ""))
	if dnat == nil || dnat.Mark != (Mark{Value: 0x4000, Known: 0x4000}) {
		t.Fatalf("after OUTPUT: %+v", dnat)
	}
	at := pkt("172.20.0.1:40000", "10.244.2.10:8080", "", "flannel.1")
	at.Mark = dnat.Mark
	masq := at
	masq.Src = netip.MustParseAddr("10.244.1.0")
	a := rs.NAT("POSTROUTING", at, masq)
	if a == nil || ref(a.Rule) != "KUBE-POSTROUTING 03" || len(a.Assumed) != 0 {
		t.Fatalf("POSTROUTING with the mark: %+v", a)
	}
	// Without it, the mark is an assumption: the first MASQUERADE that
	// fits is flannel's.
	at.Mark, masq.Mark = Mark{}, Mark{}
	if a := rs.NAT("POSTROUTING", at, masq); a == nil || len(a.Assumed) == 0 {
		t.Fatalf("POSTROUTING without the mark: %+v", a)
	}
}

// An IPv6 packet meets ip6tables' rules, not these: nothing is attributed,
// not even KUBE-POSTROUTING's MASQUERADE, which matches any address.
func TestIPv6NotAttributedToIPv4Rules(t *testing.T) {
	rs := load(t, "snat-missing-n1", staleReturn, "")
	pre := pkt("[fd00:20::1]:40000", "[fd00:10:244:2::10]:8080", "", "flannel.1")
	post := pkt("[fd00:10:244:1::]:40000", "[fd00:10:244:2::10]:8080", "", "flannel.1")
	if a := rs.NAT("POSTROUTING", pre, post); a != nil {
		t.Errorf("IPv6 packet attributed to %s", ref(a.Rule))
	}
	if a := rs.Drop("FORWARD", pre); a != nil {
		t.Errorf("IPv6 drop attributed to %s", ref(a.Rule))
	}
}

// ip6tables' rules, kept beside iptables' in a snapshot, attribute IPv6
// packets: the stale hostPort chain's DNAT to [addr]:port decided, and the
// live chain's would have chosen elsewhere; iptables' rules are not asked.
func TestIPv6AttributedToIP6tablesRules(t *testing.T) {
	text4, err := os.ReadFile("testdata/stale-hostport-n1.rules")
	if err != nil {
		t.Fatal(err)
	}
	text6, err := os.ReadFile("testdata/stale-hostport-v6-n1.rules6")
	if err != nil {
		t.Fatal(err)
	}
	s := NewSnapshot(1, 0, string(text4), string(text6), "")
	if s.Err != nil || s.Ruleset == nil || s.Ruleset.IPv6 == nil {
		t.Fatalf("snapshot: %v", s.Err)
	}
	rs6 := s.Ruleset.IPv6
	pre := pkt("[fd00:172:20::fe]:40000", "[fd00:172:20::1]:8443", "eth0", "")
	post := pkt("[fd00:172:20::fe]:40000", "[fd00:10:244:1::36]:443", "eth0", "")
	a := rs6.NAT("PREROUTING", pre, post)
	if !attributedTo(t, a, "CNI-DN-093e6edd5ba1d6052a1ee 03") {
		return
	}
	if o := rs6.Other(a, pre); o == nil || o.Rule.ToDestination != "[fd00:10:244:1::34]:443" {
		t.Errorf("other rule: %+v, want the live chain's DNAT", o)
	}
	if a := s.Ruleset.NAT("PREROUTING", pre, post); a != nil {
		t.Errorf("IPv6 packet attributed to an iptables rule: %s", ref(a.Rule))
	}
	if a := rs6.NAT("PREROUTING", pkt("172.20.0.254:40000", "172.20.0.1:8443", "eth0", ""), pkt("172.20.0.254:40000", "10.244.1.36:443", "eth0", "")); a != nil {
		t.Errorf("IPv4 packet attributed to an ip6tables rule: %s", ref(a.Rule))
	}
}

func TestInRange(t *testing.T) {
	for _, tc := range []struct {
		arg, addrPort string
		unchanged     uint16
		in            bool
	}{
		{"10.244.1.36:443", "10.244.1.36:443", 0, true},
		{"10.244.1.36", "10.244.1.36:8443", 8443, true},
		{"10.0.0.1-10.0.0.9:80-90", "10.0.0.5:85", 0, true},
		{"10.0.0.1-10.0.0.9:80-90", "10.0.0.10:85", 0, false},
		{"[fd00::36]:443", "[fd00::36]:443", 0, true},
		{"[fd00::36]:443", "[fd00::37]:443", 0, false},
		{"fd00::36", "[fd00::36]:8443", 8443, true},
		{"[fd00::1]-[fd00::9]:80-90", "[fd00::5]:85", 0, true},
		{"[fd00::1]-[fd00::9]:80-90", "[fd00::5]:91", 0, false},
	} {
		ap := netip.MustParseAddrPort(tc.addrPort)
		if got := inRange(tc.arg, ap.Addr(), ap.Port(), tc.unchanged); got != tc.in {
			t.Errorf("inRange(%q, %s) = %v, want %v", tc.arg, tc.addrPort, got, tc.in)
		}
	}
}
