package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/netns"
)

// StreamServiceIP is conntrack-invalid's ClusterIP, whose endpoint is p2.
const StreamServiceIP = "10.96.0.42"

// kubeProxyForward is the filter table kube-proxy (iptables mode, 1.28)
// writes on every node: KUBE-FORWARD, whose first rule drops what
// conntrack judged INVALID.
func kubeProxyForward() string {
	return `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FORWARD - [0:0]
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`
}

// 9. Pod p1 calls a ClusterIP whose endpoint, p2, is on node 2; once the
// reply is read, p2's side sends a segment far past the window conntrack
// keeps for it (kubernetes#74839: a retransmission, a window conntrack did
// not see grow). Node 2's conntrack judges it INVALID and kube-proxy's
// KUBE-FORWARD drops it there. In the healthy twin both nodes' conntrack
// is liberal (nf_conntrack_tcp_be_liberal=1, kube-proxy's
// conntrack.tcpBeLiberal): the segment reaches p1, whose TCP discards it.
func conntrackInvalid(healthy bool, f Family) *Scenario {
	t := nodeBase(f, 0)
	service{name: "stream", clusterIP: StreamServiceIP, port: "80", endpoints: []endpoint{{f.Pod2, fmt.Sprint(PodPort)}}}.write(&t)
	kubeProxyNodePorts(&t)
	sc := &Scenario{
		Description: fmt.Sprintf("pod p1 calls ClusterIP %s, whose endpoint p2 is on node 2; p2's side then sends a segment outside conntrack's window",
			f.HostPort(StreamServiceIP, 80)),
		Pods:    basePods,
		Servers: []Server{{Pod: "p2", Port: PodPort, Accept: true, Hold: true}},
		Rules:   map[string]string{NsNode1: t.String() + kubeProxyForward(), NsNode2: nodeRules(f, 1) + kubeProxyForward()},
		Clients: []Client{{Namespace: Prefix + "p1", Target: f.HostPort(StreamServiceIP, 80), Count: 1, Timeout: 3 * time.Second,
			OutOfWindow: &Peer{Namespace: Prefix + "p2", Addr: netip.AddrPortFrom(netip.MustParseAddr(f.Pod2), PodPort)}}},
	}
	if healthy {
		for _, ns := range []string{NsNode1, NsNode2} {
			sc.Sysctls = append(sc.Sysctls, [3]string{ns, "net.netfilter.nf_conntrack_tcp_be_liberal", "1"})
		}
	}
	return sc
}

// Peer is the far end of a client's connection: its namespace and
// address.
type Peer struct {
	Namespace string
	Addr      netip.AddrPort
}

// outOfWindowDistance is how far past the client's next expected byte the
// peer's segment is: past any receive window (at most 1 GiB with window
// scaling) and conntrack's bound on it.
const outOfWindowDistance = 1 << 30

// sendOutOfWindow sends conn's client, from its peer's namespace and
// address, a data segment beyond its receive window, acknowledging what
// the client sent. The client's socket gives both sequence numbers in
// repair mode, which it enters and leaves without sending anything.
func sendOutOfWindow(conn *net.TCPConn, peer *Peer) error {
	rcvNext, sndNext, err := sequenceNumbers(conn)
	if err != nil {
		return err
	}
	client := conn.LocalAddr().(*net.TCPAddr).AddrPort()
	ip := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP,
		SrcIP: peer.Addr.Addr().AsSlice(), DstIP: client.Addr().Unmap().AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(peer.Addr.Port()), DstPort: layers.TCPPort(client.Port()),
		Seq: rcvNext + outOfWindowDistance, Ack: sndNext, ACK: true, PSH: true, Window: 502}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		return err
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, tcp, gopacket.Payload("stale\n")); err != nil {
		return fmt.Errorf("out-of-window segment: %w", err)
	}
	return netns.Do(filepath.Join(netns.RunDir, peer.Namespace), func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket in %s: %w", peer.Namespace, err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrInet4{Addr: client.Addr().Unmap().As4()}
		if err := unix.Sendto(fd, buf.Bytes(), 0, to); err != nil {
			return fmt.Errorf("send out-of-window segment from %s: %w", peer.Namespace, err)
		}
		return nil
	})
}

// The queues of TCP_REPAIR_QUEUE (linux/tcp.h), which x/sys/unix does not
// name.
const (
	tcpRecvQueue = 1
	tcpSendQueue = 2
)

// sequenceNumbers reads a connected socket's next expected sequence
// number and its own next one (TCP_QUEUE_SEQ of the receive and send
// queues), which only repair mode shows. Leaving it with
// TCP_REPAIR_OFF_NO_WP sends no window probe.
func sequenceNumbers(conn *net.TCPConn) (rcvNext, sndNext uint32, err error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var serr error
	cerr := raw.Control(func(fd uintptr) {
		s := int(fd)
		if serr = unix.SetsockoptInt(s, unix.SOL_TCP, unix.TCP_REPAIR, unix.TCP_REPAIR_ON); serr != nil {
			return
		}
		defer unix.SetsockoptInt(s, unix.SOL_TCP, unix.TCP_REPAIR, unix.TCP_REPAIR_OFF_NO_WP)
		for _, q := range []struct {
			queue int
			seq   *uint32
		}{{tcpRecvQueue, &rcvNext}, {tcpSendQueue, &sndNext}} {
			if serr = unix.SetsockoptInt(s, unix.SOL_TCP, unix.TCP_REPAIR_QUEUE, q.queue); serr != nil {
				return
			}
			v, err := unix.GetsockoptInt(s, unix.SOL_TCP, unix.TCP_QUEUE_SEQ)
			if err != nil {
				serr = err
				return
			}
			*q.seq = uint32(v)
		}
	})
	if err := errors.Join(cerr, serr); err != nil {
		return 0, 0, fmt.Errorf("sequence numbers of %s: %w", conn.LocalAddr(), err)
	}
	return rcvNext, sndNext, nil
}
