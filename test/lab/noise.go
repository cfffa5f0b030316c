package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nettrace-dev/nettrace/internal/netns"
)

// Background traffic: what a busy node carries beside the one connection
// that fails. It runs between the lab's own pods only, bounded in time and
// count.
const (
	NoisePodIP     = "10.244.1.50" // q1, a pod on node 1 that only makes noise
	NoiseServiceIP = "10.96.0.99"  // a ClusterIP in front of p2's noise server
	NoisePort      = 9000          // TCP servers in p1 and p2
	// NoiseEndpointPort is the port of the Service's endpoint on p2: not
	// NoisePort, so that a connection through the Service and one straight
	// to p2 from the same source port never share a tuple after the DNAT
	// (conntrack would remap the port, or drop a clash: a fault of its own,
	// not background traffic).
	NoiseEndpointPort = 9002
	NoiseUDPPort      = 9001 // UDP echo in p2
	// NoiseFixedPort is the source port the reusing clients bind: each of
	// their connections has the same tuple as the one before it.
	NoiseFixedPort = 40000
	noiseMulticast = "224.0.0.251:5353"
	noiseBroadcast = "10.244.1.255:9999"
)

var noisePod = Pod{"q1", 1, NoisePodIP, IPv6.NoisePod}

// NoiseConfig bounds the background traffic.
type NoiseConfig struct {
	Duration time.Duration
	// MaxConns bounds the TCP connections, which are spread over the
	// duration so that they overlap the scenario's own traffic.
	MaxConns int
	// Workers is how many TCP clients run in parallel.
	Workers int
}

// DefaultNoise is what the busy-lab tests run beside every scenario.
var DefaultNoise = NoiseConfig{Duration: 3 * time.Second, MaxConns: 400, Workers: 4}

// NoiseReport counts what the noise did.
type NoiseReport struct {
	// TCPConns counts TCP connection attempts to NoisePort that sent a
	// SYN (each one connection, whatever its outcome); TCPFailed those
	// that failed. Unsent counts attempts the kernel refused before any
	// packet (the reused source port still held), and FirstError says why
	// the first failure or refusal happened.
	TCPConns, TCPFailed int
	Unsent              int
	FirstError          string
	Reused              int // of TCPConns, from NoiseFixedPort
	// Failed counts the failed connections per target (address:port).
	Failed                 map[string]int
	UDPExchanges, Pings    int
	Multicasts, Broadcasts int
	// QuerierRestarts counts the restarts of node 1's bridge querier,
	// each sending IGMP and MLD general queries.
	QuerierRestarts int
}

func (r NoiseReport) String() string {
	s := fmt.Sprintf("%d TCP connections (%d reusing source port %d, %d failed), %d UDP exchanges, %d pings, %d multicast and %d broadcast datagrams, %d bridge querier restarts",
		r.TCPConns, r.Reused, NoiseFixedPort, r.TCPFailed, r.UDPExchanges, r.Pings, r.Multicasts, r.Broadcasts, r.QuerierRestarts)
	if r.Unsent > 0 {
		s += fmt.Sprintf("; %d attempts refused before sending", r.Unsent)
	}
	if r.FirstError != "" {
		s += "; first error: " + r.FirstError
	}
	return s
}

func nsPath(ns string) string { return filepath.Join(netns.RunDir, ns) }

// Noise runs background traffic for cfg.Duration: short TCP connections
// from q1 to p1 (same node), to p2 (across the tunnel) and to p2 through a
// ClusterIP, half of them reusing one source port; UDP request/response;
// ICMP echo; multicast and broadcast datagrams; node 1's bridge querier
// restarted, so that its IGMP and MLD queries come. The lab must be up.
func Noise(ctx context.Context, cfg NoiseConfig) (NoiseReport, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	closers, err := serveNoiseTargets()
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	if err != nil {
		return NoiseReport{}, err
	}
	run := &noiseRun{
		cfg:  cfg,
		pace: cfg.Duration * time.Duration(cfg.Workers) / time.Duration(max(cfg.MaxConns, 1)),
		targets: []string{
			fmt.Sprintf("%s:%d", Pod1IP, NoisePort),
			fmt.Sprintf("%s:%d", Pod2IP, NoisePort),
			fmt.Sprintf("%s:%d", NoiseServiceIP, NoisePort),
		},
		rep: NoiseReport{Failed: map[string]int{}},
	}
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Go(func() { run.connect(ctx, w) })
	}
	wg.Go(func() {
		n := datagrams(ctx, noisePod.Namespace())
		run.mu.Lock()
		run.rep.UDPExchanges, run.rep.Pings, run.rep.Multicasts, run.rep.Broadcasts = n[0], n[1], n[2], n[3]
		run.mu.Unlock()
	})
	wg.Go(func() {
		n := restartQuerier(ctx, NsNode1)
		run.mu.Lock()
		run.rep.QuerierRestarts = n
		run.mu.Unlock()
	})
	wg.Wait()
	return run.rep, nil
}

// serveNoiseTargets starts the servers the background connections and
// datagrams go to; closing what it returns stops them.
func serveNoiseTargets() ([]io.Closer, error) {
	var closers []io.Closer
	for _, addr := range []struct {
		pod  Pod
		port int
	}{{basePods[0], NoisePort}, {basePods[1], NoisePort}, {basePods[1], NoiseEndpointPort}} {
		ln, err := listenIn(addr.pod.Namespace(), fmt.Sprintf("%s:%d", addr.pod.IP, addr.port))
		if err != nil {
			return closers, err
		}
		closers = append(closers, ln)
		go serveNoise(ln)
	}
	udp, err := udpEchoIn(Prefix+"p2", fmt.Sprintf("%s:%d", Pod2IP, NoiseUDPPort))
	if err != nil {
		return closers, err
	}
	return append(closers, udp), nil
}

// noiseRun is one Noise run's TCP workers' shared pacing and report.
type noiseRun struct {
	cfg     NoiseConfig
	pace    time.Duration // between one worker's connections
	targets []string
	conns   atomic.Int64 // connections begun, against cfg.MaxConns
	mu      sync.Mutex   // guards rep
	rep     NoiseReport
}

// connect is worker w: paced short connections until ctx ends or the
// run's connection budget is spent, each counted in the report.
func (r *noiseRun) connect(ctx context.Context, w int) {
	next := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		if r.conns.Add(1) > int64(r.cfg.MaxConns) {
			return
		}
		next = next.Add(r.pace)
		time.Sleep(time.Until(next))
		// Worker 0 always reuses its source port, so consecutive
		// connections share a tuple; the others use ephemeral ports.
		reuse := w == 0
		target := r.targets[(i+w)%len(r.targets)]
		if reuse {
			target = r.targets[1]
		}
		err := noiseConnect(noisePod.Namespace(), target, reuse)
		r.mu.Lock()
		if err != nil && r.rep.FirstError == "" {
			r.rep.FirstError = err.Error()
		}
		switch {
		case errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL):
			r.rep.Unsent++
		default:
			r.rep.TCPConns++
			if reuse {
				r.rep.Reused++
			}
			if err != nil {
				r.rep.TCPFailed++
				r.rep.Failed[target]++
			}
		}
		r.mu.Unlock()
	}
}

// querierPeriod is how often the background restarts a bridge's querier.
const querierPeriod = time.Second

// restartQuerier turns the multicast querier of a node's pod bridge off
// and on every querierPeriod until ctx ends, and returns how many times.
// Each start sends IGMP and MLD general queries at once, which the bridge
// also delivers to its own host: a node's bridges send them every two
// minutes or so, and every run of the busy lab must meet them, not only
// the runs that a slow machine stretches past the querier's own timer.
func restartQuerier(ctx context.Context, ns string) int {
	n := 0
	for ctx.Err() == nil {
		if run(ipn(ns, "link", "set", "cni0", "type", "bridge", "mcast_querier", "0")...) == nil &&
			run(ipn(ns, "link", "set", "cni0", "type", "bridge", "mcast_querier", "1")...) == nil {
			n++
		}
		select {
		case <-ctx.Done():
		case <-time.After(querierPeriod):
		}
	}
	return n
}

func listenIn(ns, addr string) (net.Listener, error) {
	var ln net.Listener
	err := netns.Do(nsPath(ns), func() error {
		var err error
		ln, err = ListenBacklog(addr, 4096)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("noise server %s in %s: %w", addr, ns, err)
	}
	return ln, nil
}

// serveNoise answers each connection with a line and closes it.
func serveNoise(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			c.Write([]byte("noise\n"))
			io.Copy(io.Discard, c)
			c.Close()
		}()
	}
}

func udpEchoIn(ns, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := netns.Do(nsPath(ns), func() error {
		var err error
		pc, err = net.ListenPacket("udp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("noise UDP echo %s in %s: %w", addr, ns, err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	return pc, nil
}

// noiseConnect makes one short connection: connect, read the server's
// line, close. A reusing client binds NoiseFixedPort and closes with a
// reset (SO_LINGER 0), so that no TIME_WAIT keeps the tuple from the next
// connection.
func noiseConnect(ns, target string, reuse bool) error {
	var conn net.Conn
	var derr error
	err := netns.Do(nsPath(ns), func() error {
		d := net.Dialer{Timeout: time.Second}
		if reuse {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(NoisePodIP), Port: NoiseFixedPort}
			d.Control = ReuseAddr
		}
		conn, derr = d.Dial("tcp4", target)
		return nil
	})
	if err != nil {
		return err
	}
	if derr != nil {
		return derr
	}
	defer conn.Close()
	if reuse {
		conn.(*net.TCPConn).SetLinger(0)
	}
	conn.SetDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 16)
	_, err = conn.Read(buf)
	return err
}

// datagrams sends UDP requests to p2's echo, pings p2, and multicast and
// broadcast datagrams on node 1's pod bridge, every 20 ms until ctx ends.
// It returns the counts of each.
func datagrams(ctx context.Context, ns string) [4]int {
	var n [4]int
	var udp, mcast, bcast net.PacketConn
	var icmp net.PacketConn
	err := netns.Do(nsPath(ns), func() error {
		var err error
		if udp, err = net.ListenPacket("udp4", NoisePodIP+":0"); err != nil {
			return err
		}
		if mcast, err = net.ListenPacket("udp4", NoisePodIP+":0"); err != nil {
			return err
		}
		if bcast, err = broadcastSocket(); err != nil {
			return err
		}
		icmp, err = net.ListenPacket("ip4:icmp", NoisePodIP)
		return err
	})
	for _, c := range []io.Closer{udp, mcast, bcast, icmp} {
		if c != nil {
			defer c.Close()
		}
	}
	if err != nil {
		return n
	}
	echo := &net.UDPAddr{IP: net.ParseIP(Pod2IP), Port: NoiseUDPPort}
	group, _ := net.ResolveUDPAddr("udp4", noiseMulticast)
	all, _ := net.ResolveUDPAddr("udp4", noiseBroadcast)
	buf := make([]byte, 64)
	for seq := uint16(1); ctx.Err() == nil; seq++ {
		udp.SetDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := udp.WriteTo([]byte("noise"), echo); err == nil {
			if _, _, err := udp.ReadFrom(buf); err == nil {
				n[0]++
			}
		}
		if _, err := icmp.WriteTo(echoRequest(0x4e54, seq), &net.IPAddr{IP: net.ParseIP(Pod2IP)}); err == nil {
			n[1]++
		}
		if _, err := mcast.WriteTo([]byte("noise"), group); err == nil {
			n[2]++
		}
		if _, err := bcast.WriteTo([]byte("noise"), all); err == nil {
			n[3]++
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return n
}

// ReuseAddr is a dialer's Control that sets SO_REUSEADDR: a client binding
// a fixed port connects again while its last connection on that port is
// still known to the kernel (pending at the server, or reset just now).
func ReuseAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}); err != nil {
		return err
	}
	return serr
}

func broadcastSocket() (net.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
		})
		return serr
	}}
	return lc.ListenPacket(context.Background(), "udp4", NoisePodIP+":0")
}

// echoRequest builds an ICMP echo request with its checksum.
func echoRequest(id, seq uint16) []byte {
	b := make([]byte, 16)
	b[0] = 8 // echo request
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], "nettrace")
	var sum uint32
	for i := 0; i < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(b[2:], ^uint16(sum))
	return b
}
