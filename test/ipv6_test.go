package test

import (
	"net"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
)

// A TCP connection over IPv6 between two namespaces, selected by an IPv6
// filter: the device, nat, listener and TCP points report it with its
// IPv6 tuples, and its packets make one flow.
func TestIPv6Tuples(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	const caddr, saddr = "fd00:98:60::1", "fd00:98:60::2"
	veth(t, client, "c0", caddr+"/64 nodad", server, "s0", saddr+"/64 nodad")
	var ln net.Listener
	inNetns(t, server, func() error {
		var err error
		ln, err = net.Listen("tcp6", "["+saddr+"]:8443")
		return err
	})
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, filter := range []string{"ip6 and port 8443", "host " + saddr} {
		t.Run(filter, func(t *testing.T) {
			w := startWatch(t, "--netns", client, "--netns", server, filter)
			inNetns(t, client, func() error {
				// A fresh link resolves its first neighbour in up to a second
				// (the solicitation is retransmitted after one).
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
				{"the SYN leaving the client's OUTPUT", func(e output.JSONEvent) bool {
					return e.Point == "nat" && e.Hook == "OUTPUT" && e.Netns == client && isSYN(e) && e.Tuple.Src == caddr
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

func isIPv6(addr string) bool {
	ip := net.ParseIP(addr)
	return ip != nil && ip.To4() == nil
}
