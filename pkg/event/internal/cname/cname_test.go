package cname

import "testing"

func TestNames(t *testing.T) {
	for _, c := range []struct{ member, field, exported string }{
		{"ts", "ts", "Ts"},
		{"cpu", "cpu", "CPU"},
		{"out_ifindex", "outIfindex", "OutIfindex"},
		{"dst_mtu", "dstMTU", "DstMTU"},
		{"skb_seen", "skbSeen", "SkbSeen"},
		{"listen_overflows", "listenOverflows", "ListenOverflows"},
	} {
		if got := Field(c.member); got != c.field {
			t.Errorf("Field(%q) = %q, want %q", c.member, got, c.field)
		}
		if got := Exported(c.member); got != c.exported {
			t.Errorf("Exported(%q) = %q, want %q", c.member, got, c.exported)
		}
	}
}
