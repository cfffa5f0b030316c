package test

import (
	"bytes"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/output"
)

// A TCP connection over IPv6 between two namespaces, selected by an IPv6
// filter: the device, listener and TCP points report it with its IPv6
// tuples, and its packets make one flow.
func TestIPv6Tuples(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	const caddr, saddr = "fd00:98:60::1", "fd00:98:60::2"
	veth(t, client, "c0", caddr+"/64 nodad", server, "s0", saddr+"/64 nodad")
	listen(t, server, "["+saddr+"]:8443", 0, true)
	for _, filter := range []string{"ip6 and port 8443", "host " + saddr} {
		t.Run(filter, func(t *testing.T) {
			w := startWatch(t, "--netns", client, "--netns", server, filter)
			inNetns(t, client, func() error {
				c, err := net.DialTimeout("tcp6", "["+saddr+"]:8443", 3*time.Second)
				if err == nil {
					c.Close()
				}
				return err
			})
			tr := w.stop(t)

			syn := func(ns, kind string) func(e output.JSONEvent) bool {
				return func(e output.JSONEvent) bool {
					return e.Point == "dev" && e.Kind == kind && e.Netns == ns && e.Tuple != nil &&
						e.Tuple.Src == caddr && e.Tuple.Dst == saddr && e.Tuple.Dport == 8443 && e.Tuple.Flags == "S"
				}
			}
			for _, want := range []struct {
				what string
				pred func(e output.JSONEvent) bool
			}{
				{"the SYN leaving the client", syn(client, "tx")},
				{"the SYN reaching the server", syn(server, "rx")},
				{"the SYN-ACK", func(e output.JSONEvent) bool {
					return e.Point == "dev" && e.Tuple != nil && e.Tuple.Src == saddr && e.Tuple.Dst == caddr && e.Tuple.Flags == "S."
				}},
				{"the SYN queued by the listener", func(e output.JSONEvent) bool {
					return e.Point == "syn" && e.Netns == server && e.SYN.Outcome == "queued" && e.SYN.Listener == "["+saddr+"]:8443"
				}},
				{"the client's socket established", func(e output.JSONEvent) bool {
					return e.Point == "tcp" && e.Netns == client && e.TCP != nil && e.TCP.NewState == "ESTABLISHED" &&
						e.Tuple != nil && e.Tuple.Src == caddr && e.Tuple.Dst == saddr
				}},
			} {
				if len(find(tr.events, want.pred)) == 0 {
					t.Errorf("no event for %s:\n%s", want.what, dump(tr.events))
				}
			}
			if v4 := find(tr.events, func(e output.JSONEvent) bool { return e.Tuple != nil && !isIPv6(e.Tuple.Src) }); len(v4) > 0 {
				t.Errorf("IPv4 events under an IPv6 filter:\n%s", dump(v4))
			}
			var conns int
			for _, f := range tr.flows {
				if f.Tuple != nil && f.Tuple.Proto == "tcp" && (f.Tuple.Dport == 8443 || f.Tuple.Sport == 8443) {
					conns++
				}
			}
			if conns != 1 {
				t.Errorf("%d TCP flows for one connection:\n%s", conns, dump(tr.flows))
			}
		})
	}
}

// NAT66: a ClusterIP-style DNAT in ip6tables' nat OUTPUT and a MASQUERADE
// in POSTROUTING. The nat events carry the IPv6 tuples before and after
// each and the conntrack entry's, the route point the re-route the DNAT
// caused, and the reply is followed back through the entry and un-DNATed.
func TestIPv6NATTuplesAndConntrack(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	const caddr, saddr, service = "fd00:98:61::1", "fd00:98:61::2", "fd00:96::10"
	veth(t, client, "c0", caddr+"/64 nodad", server, "s0", saddr+"/64 nodad")
	script(t,
		"ip netns exec "+client+" ip6tables -t nat -A OUTPUT -d "+service+" -p tcp --dport 80 -j DNAT --to-destination ["+saddr+"]:8080",
		"ip netns exec "+client+" ip6tables -t nat -A POSTROUTING -o c0 -j MASQUERADE",
		"ip -n "+client+" -6 route add fd00:96::/64 dev c0",
		// The client calls from a second address so that MASQUERADE really
		// rewrites the source.
		"ip -n "+client+" addr add fd00:99::5/128 dev lo",
	)
	listen(t, server, "["+saddr+"]:8080", 0, true)
	w := startWatch(t, "--netns", client, "--netns", server, "host "+service)
	inNetns(t, client, func() error {
		d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("fd00:99::5")}}
		c, err := d.Dial("tcp6", "["+service+"]:80")
		if err == nil {
			c.Close()
		}
		return err
	})
	w.await(t, "replies un-DNATed in the client", 1, func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Netns == client && e.Translated && e.CT != nil && e.CT.Direction == "reply"
	})
	events := w.stop(t).events

	dnat := find(events, func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Hook == "OUTPUT" && e.Translated && e.Tuple.Flags == "S"
	})
	if len(dnat) == 0 {
		t.Fatalf("no translated SYN at nat OUTPUT:\n%s", dump(events))
	}
	d := dnat[0]
	if d.Pre.Dst != service || d.Pre.Dport != 80 || d.Tuple.Dst != saddr || d.Tuple.Dport != 8080 {
		t.Errorf("DNAT tuples: pre %+v post %+v", d.Pre, d.Tuple)
	}
	if d.CT == nil || !hasString(d.CT.Status, "DST_NAT") || d.CT.Orig.Dst != service || d.CT.Reply.Src != saddr {
		t.Errorf("conntrack of the DNATed SYN: %+v", d.CT)
	}
	// The re-route the DNAT caused (ip6_route_me_harder, or the FIB
	// lookup it made), out of the client's link.
	reroute := find(events, func(e output.JSONEvent) bool {
		return e.Point == "route" && e.Skb == d.Skb && e.Route != nil && e.Route.Dev == "c0" && e.Route.Err == 0
	})
	if len(reroute) == 0 {
		t.Errorf("no re-route of the DNATed SYN out of c0:\n%s", dump(find(events, func(e output.JSONEvent) bool { return e.Point == "route" })))
	} else if reroute[0].Tuple == nil || reroute[0].Tuple.Dst != saddr {
		t.Errorf("re-route tuple %+v, want the new destination %s", reroute[0].Tuple, saddr)
	}
	snat := find(events, func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Hook == "POSTROUTING" && e.Tuple.Flags == "S" && e.Netns == client
	})
	if len(snat) == 0 || snat[0].Pre == nil || snat[0].Pre.Src != "fd00:99::5" || snat[0].Tuple.Src != caddr {
		t.Fatalf("MASQUERADE of the SYN, want source fd00:99::5 -> %s:\n%s", caddr, dump(snat))
	}
	undnat := find(events, func(e output.JSONEvent) bool {
		return e.Point == "nat" && e.Netns == client && e.Translated && e.CT != nil && e.CT.Direction == "reply" &&
			e.Tuple.Src == service && e.Tuple.Sport == 80
	})
	if len(undnat) == 0 {
		t.Errorf("reply not seen un-DNATed back to [%s]:80:\n%s", service, dump(events))
	}
}

func isIPv6(addr string) bool {
	ip := net.ParseIP(addr)
	return ip != nil && ip.To4() == nil
}

// IPv6 packets whose transport header follows extension headers: a TCP
// SYN carrying a Destination Options header (the socket's sticky option)
// and a UDP datagram the sender fragments over the link's MTU. Every
// point parses a packet's tuple past its extension headers: the device
// point reports the SYN and the first fragment with their ports, and the
// later fragment, which carries no transport header, without.
func TestIPv6ExtensionHeaders(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	const caddr, saddr = "fd00:98:62::1", "fd00:98:62::2"
	veth(t, client, "c0", caddr+"/64 nodad", server, "s0", saddr+"/64 nodad")
	listen(t, server, "["+saddr+"]:8443", 0, true)
	w := startWatch(t, "--netns", client, "--netns", server, "host "+saddr)
	// PadN, four bytes: the smallest Destination Options header (8 bytes;
	// the kernel fills in its next header).
	dstopts := string([]byte{0, 0, 1, 4, 0, 0, 0, 0})
	inNetns(t, client, func() error {
		d := net.Dialer{Timeout: 3 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var err error
			if cerr := rc.Control(func(fd uintptr) {
				err = unix.SetsockoptString(int(fd), unix.IPPROTO_IPV6, unix.IPV6_DSTOPTS, dstopts)
			}); cerr != nil {
				return cerr
			}
			return err
		}}
		c, err := d.Dial("tcp6", "["+saddr+"]:8443")
		if err == nil {
			c.Close()
		}
		return err
	})
	inNetns(t, client, func() error {
		c, err := net.Dial("udp6", "["+saddr+"]:9999")
		if err != nil {
			return err
		}
		defer c.Close()
		// Two fragments over 1500 bytes. Not zeros: the later fragment's
		// payload, read as ports, must not pass for no ports.
		_, err = c.Write(bytes.Repeat([]byte{0xab}, 3000))
		return err
	})
	tr := w.stop(t)

	rx := func(proto string, dport uint16, flags string) func(e output.JSONEvent) bool {
		return func(e output.JSONEvent) bool {
			return e.Point == "dev" && e.Kind == "rx" && e.Netns == server && e.Tuple != nil && e.Tuple.Proto == proto &&
				e.Tuple.Src == caddr && e.Tuple.Dst == saddr && e.Tuple.Dport == dport && e.Tuple.Flags == flags
		}
	}
	for _, want := range []struct {
		what string
		pred func(e output.JSONEvent) bool
	}{
		{"the SYN past its Destination Options header", rx("tcp", 8443, "S")},
		{"the first fragment with its ports", rx("udp", 9999, "")},
		{"the later fragment without ports", rx("udp", 0, "")},
	} {
		if len(find(tr.events, want.pred)) == 0 {
			t.Errorf("no event for %s:\n%s", want.what, dump(tr.events))
		}
	}
}
