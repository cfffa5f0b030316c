package test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// synACKDelay holds the server's SYN-ACKs past the first dial's timeout.
const synACKDelay = 1500 * time.Millisecond

// A client gives up on a connection whose SYN-ACK is late and connects
// again from the same port, as the busy lab's reusing client does when a
// slow machine delays the answer past its dial's timeout: the first
// connection's SYN-ACK arrives while the second waits for its own, on the
// same tuple, through the same conntrack entry. Each SYN-ACK belongs to
// the connection whose SYN it acknowledges: two connections, two flows.
// A netfilter queue in the server's OUTPUT makes the SYN-ACKs late
// (ntlab queue --delay), what a loaded machine does at random.
func TestLateSYNACKOnAReusedPort(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, client, "c0", "10.98.50.1/24", server, "s0", "10.98.50.2/24")
	script(t,
		// Conntrack and NAT in the client's namespace, as on a node.
		"ip netns exec "+client+" iptables -t nat -A POSTROUTING -o c0 -p tcp --dport 9000 -j MASQUERADE",
		"ip netns exec "+server+" iptables -A OUTPUT -p tcp --sport 9000 --tcp-flags SYN,ACK SYN,ACK -j NFQUEUE --queue-num 5")
	delaySYNACKs(t, server)
	listen(t, server, "10.98.50.2:9000", 0, true)
	w := startWatch(t, "--netns", client, "--netns", server, "port 9000")
	if err := dialFrom(t, client, 40000, time.Second); err == nil {
		t.Fatalf("the first connection got its SYN-ACK within 1 s, though it is held %s", synACKDelay)
	}
	if err := dialFrom(t, client, 40000, lab.Patience); err != nil {
		t.Fatalf("the second connection from port 40000: %v", err)
	}
	flows := w.stop(t).flows

	var reused []output.JSONFlow
	for _, f := range flows {
		if f.Tuple != nil && f.Tuple.Sport == 40000 && f.Tuple.Dport == 9000 {
			reused = append(reused, f)
		}
	}
	if len(reused) != 2 {
		t.Fatalf("%d flows from port 40000 for 2 connections:\n%s", len(reused), dump(reused))
	}
	for i, f := range reused {
		t.Logf("connection %d: %v", i+1, labels(f))
		if labels(f)[0] != "SYN" || !hasString(labels(f), "SYN-ACK") {
			t.Errorf("connection %d: packets %v, want a SYN first and its SYN-ACK:\n%s", i+1, labels(f), dump([]output.JSONFlow{f}))
		}
	}
}

// delaySYNACKs serves the server's queue 5, accepting each packet
// synACKDelay after it came, until the test ends.
func delaySYNACKs(t *testing.T, ns string) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "queue-ready")
	cmd := exec.Command("ip", "netns", "exec", ns, labBin, "queue", "--num", "5", "--delay", synACKDelay.String(), "--ready-file", ready)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("ntlab queue: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(lab.Patience); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ntlab queue not bound after %s", lab.Patience)
		}
	}
}

// dialFrom connects from a fixed source port, reusable at once.
func dialFrom(t *testing.T, ns string, port int, timeout time.Duration) error {
	t.Helper()
	var err error
	inNetns(t, ns, func() error {
		d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{Port: port}, Control: lab.ReuseAddr}
		var c net.Conn
		c, err = d.Dial("tcp4", "10.98.50.2:9000")
		if err == nil {
			c.Close()
		}
		return nil
	})
	return err
}

// labels lists a flow's packets by their labels ("SYN", "SYN-ACK", ...).
func labels(f output.JSONFlow) []string {
	var out []string
	for _, p := range f.Packets {
		out = append(out, p.Label)
	}
	return out
}

// A connect from a port whose tuple an open connection holds is refused
// (EADDRNOTAVAIL) before it sends anything, as the busy lab's reusing
// client is when another of its connections still holds the tuple: the
// refused socket's states (SYN-SENT, then CLOSE) name the tuple with
// another socket's cookie. They are no connection; the open one's packets
// after them, its reset, stay in its own flow.
func TestRefusedConnectOnABusyTuple(t *testing.T) {
	client, server := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, client, "c0", "10.98.51.1/24", server, "s0", "10.98.51.2/24")
	listen(t, server, "10.98.51.2:9000", 0, true)
	w := startWatch(t, "--netns", client, "--netns", server, "port 9000")
	var open *net.TCPConn
	var refused error
	inNetns(t, client, func() error {
		d := net.Dialer{Timeout: lab.Patience, LocalAddr: &net.TCPAddr{Port: 40000}, Control: lab.ReuseAddr}
		c, err := d.Dial("tcp4", "10.98.51.2:9000")
		if err != nil {
			return err
		}
		open = c.(*net.TCPConn)
		_, refused = d.Dial("tcp4", "10.98.51.2:9000")
		return nil
	})
	if !errors.Is(refused, syscall.EADDRNOTAVAIL) {
		t.Fatalf("a second connect on the open connection's tuple: %v, want EADDRNOTAVAIL", refused)
	}
	open.SetLinger(0)
	open.Close()
	flows := w.stop(t).flows

	var conns []output.JSONFlow
	for _, f := range flows {
		if f.Tuple != nil && f.Tuple.Sport == 40000 && len(f.Packets) > 0 {
			conns = append(conns, f)
		}
	}
	if len(conns) != 1 {
		t.Fatalf("%d flows with packets from port 40000 for 1 connection:\n%s", len(conns), dump(flows))
	}
	if l := labels(conns[0]); l[0] != "SYN" || !hasString(l, "RST") {
		t.Errorf("the connection's flow holds %v, want its SYN first and its reset:\n%s", l, dump(conns))
	}
}
