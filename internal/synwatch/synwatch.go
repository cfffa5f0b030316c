// Package synwatch is the syn observation point's user-space part. As a
// method of its own, for kernels where neither tcp_conn_request nor the
// consume_skb tracepoint's location can be used: a SYN seen entering a
// namespace's INPUT hook that gets no SYN-ACK back within a grace period is
// checked against the listener's queues (sock_diag) and the namespace's
// TcpExt counters, and reported as a syn event. On 6.x a SYN dropped for a
// full accept queue is consumed, not freed, so no drop event exists for it.
// Beside the kernel's tracepoint method, it completes a drop the kernel
// decided but whose listener it did not know with those same numbers.
package synwatch

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

const (
	tcpSYN = 0x02
	tcpACK = 0x10
	tcpRST = 0x04
	// stateListen is TCP_LISTEN in sock_diag's state numbering.
	stateListen = 10
)

// Grace is how long a SYN may wait for its SYN-ACK before it is checked,
// in kernel time: the SYN is judged once events that much younger were
// read, so an answer the reader has not yet reached is never taken as
// missing.
const Grace = 300 * time.Millisecond

type pendingSYN struct {
	ev event.Event
	// local is set when the SYN was seen at INPUT (delivered to this
	// namespace); a SYN only seen on a device may be forwarded.
	local bool
}

type key struct {
	netns uint32
	t     event.Tuple
}

// Watcher tracks SYNs delivered locally until they are answered or judged.
type Watcher struct {
	watched  netns.Watched
	pending  map[key]pendingSYN
	counters map[uint32]netstat
}

// New watches SYNs in the given namespaces (only those can be entered for
// sock_diag and their counters).
func New(targets []netns.Target) *Watcher {
	w := &Watcher{pending: map[key]pendingSYN{}, counters: map[uint32]netstat{}}
	for _, t := range targets {
		w.AddNamespace(t)
	}
	return w
}

// AddNamespace starts watching a namespace, taking its counters' baseline.
func (w *Watcher) AddNamespace(t netns.Target) {
	if !w.watched.Add(t) {
		return
	}
	if c, err := readNetstat(t.Path); err == nil {
		w.counters[t.Inode] = c
	}
}

// ForgetNamespace stops watching a namespace that is gone.
func (w *Watcher) ForgetNamespace(ino uint32) {
	w.watched.Remove(ino)
	delete(w.counters, ino)
}

// Observe feeds one event. SYNs arriving (at INPUT, or received by a
// device: the nat point reports INPUT only in namespaces with NAT hooks
// when it probes the NAT function) become pending; a reset leaving the
// namespace answers the SYN it replies to, and a SYN-ACK makes emit report
// the SYN as queued at its listener.
func (w *Watcher) Observe(e *event.Event, emit func(*event.Event)) {
	if e.Tuple.Proto != event.ProtoTCP || e.HasInner() {
		return
	}
	arriving := (e.Point == event.PointNAT && e.Hook == event.HookInput) || (e.Point == event.PointDev && e.Kind == event.KindDevRx)
	leaving := (e.Point == event.PointNAT && e.Hook == event.HookOutput) || (e.Point == event.PointDev && e.Kind == event.KindDevTx)
	f := e.Tuple.TCPFlags
	switch {
	case arriving && f&tcpSYN != 0 && f&tcpACK == 0:
		k := key{e.Netns, e.Tuple.WithoutFlags()}
		local := e.Point == event.PointNAT
		if p, ok := w.pending[k]; ok && p.ev.Skb == e.Skb {
			// The same SYN seen further in (device, then INPUT).
			if local && !p.local {
				p.local, p.ev.Hook = true, event.HookInput
				w.pending[k] = p
			}
			return
		}
		if _, ok := w.watched.Path(e.Netns); ok {
			ev := *e
			ev.Packet = nil // refers to the ring buffer record
			w.pending[k] = pendingSYN{ev: ev, local: local}
		}
	case leaving && f&tcpRST != 0:
		delete(w.pending, key{e.Netns, e.Tuple.Reverse().WithoutFlags()})
	case leaving && f&(tcpSYN|tcpACK) == tcpSYN|tcpACK:
		k := key{e.Netns, e.Tuple.Reverse().WithoutFlags()}
		p, ok := w.pending[k]
		if !ok {
			return
		}
		delete(w.pending, k)
		if !p.local {
			return // maybe only forwarded here: no claim about a listener
		}
		syn := p.ev
		syn.Point, syn.Kind, syn.Time = event.PointSYN, event.KindSYN, e.Time
		syn.SYN = event.SYN{Listener: netip.AddrPortFrom(k.t.Dst, k.t.Dport), Outcome: event.SYNQueued}
		emit(&syn)
	}
}

// Expire judges the SYNs whose grace period has passed by readTo (the
// kernel time events were read up to), calling emit with a syn event for
// each that reached a listener, was not answered, and has evidence of a
// drop: the accept queue is full or the namespace's listen drop counters
// moved. Without evidence nothing is claimed. flush judges all pending
// SYNs regardless of age (at the end of a run, all events read).
func (w *Watcher) Expire(readTo uint64, flush bool, emit func(*event.Event)) {
	byNetns := map[uint32][]key{}
	for k, p := range w.pending {
		if flush || readTo >= p.ev.Time+uint64(Grace) {
			byNetns[k.netns] = append(byNetns[k.netns], k)
		}
	}
	for ino, keys := range byNetns {
		path, _ := w.watched.Path(ino)
		listeners, _ := listenersIn(path)
		var delta netstat
		if c, err := readNetstat(path); err == nil {
			delta = c.sub(w.counters[ino])
			w.counters[ino] = c
		}
		for _, k := range keys {
			p := w.pending[k]
			delete(w.pending, k)
			l, ok := findListener(listeners, k.t.Dst, k.t.Dport)
			if !ok {
				continue // no listener: the kernel resets, the tcp point shows it
			}
			// The SYN's own time: the judgement is about that packet, and
			// its flow is still open (Grace is well under the flow idle time).
			e := p.ev
			e.Point, e.Kind = event.PointSYN, event.KindSYN
			e.SYN = event.SYN{
				Listener:     netip.AddrPortFrom(k.t.Dst, k.t.Dport),
				AcceptQueue:  l.RQueue,
				AcceptMax:    l.WQueue,
				ListenDrops:  delta.listenDrops,
				ListenOverfl: delta.listenOverflows,
			}
			switch {
			case l.RQueue > l.WQueue || (delta.listenOverflows > 0 && l.RQueue >= l.WQueue):
				e.SYN.Outcome = event.SYNDropAcceptQueue
			case delta.listenDrops > 0:
				e.SYN.Outcome = event.SYNDropListenDrops
			default:
				continue
			}
			emit(&e)
		}
	}
}

// Complete fills in, from sock_diag and the TcpExt counters, the listener
// and queues of a SYN the kernel saw consumed by a listener it knew nothing
// of: dropped without a SYN-ACK (SYNDropUnanswered), or where SYN-ACKs were
// not seen yet (SYNUnobserved). The queue that was full names the cause; a
// SYN whose answer was not seen stays unjudged without one. The event
// keeps its own time. Other events are left as they are.
func (w *Watcher) Complete(e *event.Event) {
	if e.Point != event.PointSYN || (e.SYN.Outcome != event.SYNDropUnanswered && e.SYN.Outcome != event.SYNUnobserved) {
		return
	}
	path, ok := w.watched.Path(e.Netns)
	if !ok {
		return
	}
	listeners, err := listenersIn(path)
	if err != nil {
		return
	}
	l, ok := findListener(listeners, e.SYN.Listener.Addr(), e.SYN.Listener.Port())
	if !ok {
		return
	}
	var delta netstat
	if c, err := readNetstat(path); err == nil {
		delta = c.sub(w.counters[e.Netns])
		w.counters[e.Netns] = c
	}
	if la, ok := netip.AddrFromSlice(l.ID.Source); ok {
		e.SYN.Listener = netip.AddrPortFrom(la.Unmap(), l.ID.SourcePort)
	}
	e.SYN.AcceptQueue, e.SYN.AcceptMax = l.RQueue, l.WQueue
	e.SYN.ListenDrops, e.SYN.ListenOverfl = delta.listenDrops, delta.listenOverflows
	if l.RQueue > l.WQueue || (delta.listenOverflows > 0 && l.RQueue >= l.WQueue) {
		e.SYN.Outcome = event.SYNDropAcceptQueue
	}
}

// findListener is the listener a SYN to addr:port reached: the one bound
// to the address, else one bound to every address.
func findListener(ls []*netlink.Socket, addr netip.Addr, port uint16) (*netlink.Socket, bool) {
	addr = addr.Unmap()
	var wildcard *netlink.Socket
	for _, l := range ls {
		la, ok := netip.AddrFromSlice(l.ID.Source)
		if !ok || l.ID.SourcePort != port {
			continue
		}
		// sock_diag gives an IPv4 socket's address in 16 bytes
		// (net.IPv4), which must be unmapped to compare.
		if l.Family == unix.AF_INET {
			la = la.Unmap()
			if la.Is4() != addr.Is4() {
				continue
			}
		}
		switch {
		case la.Unmap() == addr:
			return l, true // the kernel prefers the listener bound to the address
		case la.IsUnspecified() && wildcard == nil:
			// [::] takes IPv4 too, unless IPV6_V6ONLY, which is rare
			// and which sock_diag's answer here does not carry.
			wildcard = l
		}
	}
	return wildcard, wildcard != nil
}

// listenersIn lists the TCP listening sockets of a namespace. For a
// listener, sock_diag's rqueue is the accept queue length and wqueue its
// limit (the listen backlog).
func listenersIn(path string) ([]*netlink.Socket, error) {
	var out []*netlink.Socket
	err := netns.Do(path, func() error {
		// Both families: a server listening on [::] (Go's default)
		// takes IPv4 connections, and is listed under IPv6 only.
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			socks, err := netlink.SocketDiagTCP(family)
			if err != nil && family == unix.AF_INET6 {
				continue // a kernel without IPv6 has no such listener
			}
			if err != nil {
				return fmt.Errorf("sock_diag: %w", err)
			}
			for _, s := range socks {
				if s.State == stateListen {
					out = append(out, s)
				}
			}
		}
		return nil
	})
	return out, err
}

type netstat struct {
	listenOverflows uint64
	listenDrops     uint64
}

func (a netstat) sub(b netstat) netstat {
	return netstat{a.listenOverflows - b.listenOverflows, a.listenDrops - b.listenDrops}
}

// readNetstat reads the TcpExt counters of a namespace: /proc/net/netstat
// shows those of the reading thread's namespace.
func readNetstat(path string) (netstat, error) {
	var raw []byte
	err := netns.Do(path, func() error {
		var err error
		raw, err = os.ReadFile("/proc/thread-self/net/netstat")
		return err
	})
	if err != nil {
		return netstat{}, fmt.Errorf("read TcpExt counters: %w", err)
	}
	return parseNetstat(raw)
}

// parseNetstat reads the TcpExt header and value lines.
func parseNetstat(raw []byte) (netstat, error) {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var header []string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "TcpExt:" {
			continue
		}
		if header == nil {
			header = fields
			continue
		}
		var n netstat
		for i := 1; i < len(fields) && i < len(header); i++ {
			v, _ := strconv.ParseUint(fields[i], 10, 64)
			switch header[i] {
			case "ListenOverflows":
				n.listenOverflows = v
			case "ListenDrops":
				n.listenDrops = v
			}
		}
		return n, nil
	}
	return netstat{}, fmt.Errorf("no TcpExt counters in netstat")
}
