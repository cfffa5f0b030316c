// Package ruletrace names the netfilter rules packets went through as the
// kernel traces them: in each watched namespace it adds an nftables table
// of nettrace's own whose chains, ahead of every other at the hooks where
// packets enter, set nftrace on the packets the filter selects; the kernel
// then reports each rule such a packet matches (NFT_MSG_TRACE), which is
// read per namespace and resolved to the rule's position in its chain
// (iptables-nft rules are nftables rules, in iptables-save's order).
//
// The table is owned by the netlink socket that added it: the kernel
// removes it when that socket closes, at Close or when nettrace dies,
// killed or not. Nothing else in any ruleset changes.
package ruletrace

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// Tracer traces the rules of namespaces.
type Tracer struct {
	tables []tableBatch
	steps  func(ruleset.Trace)
	report func(error)

	mu     sync.Mutex
	spaces map[uint32]*space
	closed bool
	wg     sync.WaitGroup
	lost   atomic.Uint64
}

// Start traces the rules of targets for the packets prog selects until
// Close: each traced step goes to steps (from the namespace's own
// goroutine). A namespace where tracing is unavailable is reported once and
// the others go on; an error says no namespace can be traced with prog.
func Start(targets []netns.Target, prog *filter.Program, steps func(ruleset.Trace), report func(error)) (*Tracer, error) {
	table, err := tableMessages(prog)
	if err != nil {
		return nil, fmt.Errorf("trace rules: %w", err)
	}
	t := &Tracer{tables: table, steps: steps, report: report, spaces: map[uint32]*space{}}
	for _, target := range targets {
		t.Add(target)
	}
	return t, nil
}

// Add traces a namespace not traced yet.
func (t *Tracer) Add(target netns.Target) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.spaces[target.Inode] != nil {
		return
	}
	s, err := t.open(target)
	if err != nil {
		t.report(fmt.Errorf("rules of %s not traced: %w", target.Name, err))
		t.spaces[target.Inode] = &space{}
		return
	}
	t.spaces[target.Inode] = s
	t.wg.Go(func() { s.read(t) })
}

// Forget stops tracing a namespace that is gone (its table went with it).
func (t *Tracer) Forget(ino uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.spaces[ino]; s != nil {
		s.close()
		delete(t.spaces, ino)
	}
}

// Invalidate says a namespace's ruleset changed: rule positions are read
// again.
func (t *Tracer) Invalidate(ino uint32) {
	t.mu.Lock()
	s := t.spaces[ino]
	t.mu.Unlock()
	if s != nil {
		s.stale.Store(true)
	}
}

// Lost is how many trace messages the kernel could not deliver (the
// socket's buffer was full): their packets' rules are attributed from the
// ruleset.
func (t *Tracer) Lost() uint64 { return t.lost.Load() }

// ReadThrough is the kernel time through which every namespace's trace
// steps have been delivered: a packet that passed its rules before it has
// every step it will ever have. Flows wait for it before they are
// explained, so that their rules are named as traced, not guessed.
func (t *Tracer) ReadThrough() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	through := uint64(math.MaxUint64)
	for _, s := range t.spaces {
		if s.traces != nil {
			through = min(through, s.readThrough.Load())
		}
	}
	return through
}

// syncWait bounds Sync: a reader that cannot catch up in that long is
// behind for good, and its packets' rules are named from the ruleset.
const syncWait = time.Second

// Sync waits (up to syncWait) until every namespace's reader has
// delivered the trace steps of the packets seen so far: called before the
// last flows are explained, it lets those packets be named as traced.
func (t *Tracer) Sync() {
	now := kernel.MonotonicNow()
	for deadline := time.Now().Add(syncWait); t.ReadThrough() < now && time.Now().Before(deadline); {
		time.Sleep(idleRead / 10)
	}
}

// Close stops tracing and removes nettrace's tables; when it returns, no
// trace step is being delivered any more. Closing again does nothing.
func (t *Tracer) Close() {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		for _, s := range t.spaces {
			s.close()
		}
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// space is one traced namespace.
type space struct {
	target netns.Target
	file   *os.File
	owner  *netlink.Conn // added the table: closing it removes the table
	traces *netlink.Conn
	lookup *nftables.Conn
	stale  atomic.Bool
	// readThrough is the kernel time through which the reader has
	// delivered every step (ReadThrough): when it last found the socket
	// empty with nothing in hand; MaxUint64 once it has stopped.
	readThrough atomic.Uint64

	// Owned by the reading goroutine.
	hooks     map[chainKey]string         // base chains' hooks
	positions map[chainKey]map[uint64]int // rule handles' positions
	current   map[uint32]where            // where each trace id is
}

// where is the hook a traced packet is in, and the packet as last seen:
// the kernel sends the headers once per base chain, not with every step.
type where struct {
	hook   string
	packet ruleset.Packet
}

// chainKey names a chain: tables of the same name (iptables' and
// ip6tables' nat) are in each family.
type chainKey struct {
	family       uint8
	table, chain string
}

// traceBuffer is the trace socket's receive buffer: a burst of traced
// packets sends one message per rule each.
const traceBuffer = 8 << 20

// open starts tracing in a namespace. A namespace can go between its
// listing and here (a pod deleted): that is an error to report, and what
// was opened is closed.
func (t *Tracer) open(target netns.Target) (_ *space, err error) {
	s := &space{target: target, hooks: map[chainKey]string{}, positions: map[chainKey]map[uint64]int{}, current: map[uint32]where{}}
	// No packet was traced here before the table exists.
	s.readThrough.Store(kernel.MonotonicNow())
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.file, err = os.Open(target.Path); err != nil {
		return nil, err
	}
	fd := int(s.file.Fd())
	if s.traces, err = netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd}); err != nil {
		return nil, fmt.Errorf("trace socket: %w", err)
	}
	if err = s.traces.JoinGroup(unix.NFNLGRP_NFTRACE); err != nil {
		return nil, fmt.Errorf("join the trace group: %w", err)
	}
	if err = s.traces.SetReadBuffer(traceBuffer); err != nil {
		return nil, fmt.Errorf("trace socket buffer: %w", err)
	}
	if s.lookup, err = nftables.New(nftables.WithNetNSFd(fd)); err != nil {
		return nil, err
	}
	if s.owner, err = netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd}); err != nil {
		return nil, fmt.Errorf("nftables socket: %w", err)
	}
	added := 0
	for _, b := range t.tables {
		if err := s.addTable(b); err != nil {
			// One family's table may fail where the other works (a kernel
			// without nf_tables for IPv6): the other's rules are traced.
			t.report(fmt.Errorf("rules of %s not traced: %w", target.Name, err))
			continue
		}
		added++
	}
	if added == 0 && len(t.tables) > 0 {
		return nil, errors.New("no table added")
	}
	return s, nil
}

// addTable sends a table's batch and takes the kernel's answer to each of
// its requests.
func (s *space) addTable(b tableBatch) error {
	sent, err := s.owner.SendMessages(b.messages)
	if err != nil {
		return fmt.Errorf("add table %s %s: %w", b.family.name, TableName, err)
	}
	for _, m := range sent {
		if m.Header.Flags&netlink.Acknowledge == 0 {
			continue
		}
		if _, err := s.owner.Receive(); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("add table %s %s: %w (the kernel has no owned nftables tables: 5.12 or later needed)", b.family.name, TableName, err)
			}
			return fmt.Errorf("add table %s %s: %w", b.family.name, TableName, err)
		}
	}
	return nil
}

func (s *space) close() {
	if s.traces != nil {
		s.traces.Close()
	}
	if s.owner != nil {
		s.owner.Close()
	}
	if s.file != nil {
		s.file.Close()
	}
}

// idleRead is how long the reader waits for a message before it looks
// again whether the socket is empty: how far ReadThrough may lag behind
// the kernel on a namespace without traced packets.
const idleRead = 100 * time.Millisecond

// read delivers the namespace's trace steps until its socket closes.
func (s *space) read(t *Tracer) {
	defer s.readThrough.Store(math.MaxUint64)
	for {
		before := kernel.MonotonicNow()
		if s.empty(t) {
			// Every step queued before now was taken and delivered.
			s.readThrough.Store(before)
		}
		msgs, err := s.receive()
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case errors.Is(err, unix.ENOBUFS):
			t.lost.Add(1)
			continue
		case err != nil:
			if !errors.Is(err, os.ErrClosed) && !isClosing(t) {
				t.report(fmt.Errorf("rule traces of %s: %w", s.target.Name, err))
			}
			return
		}
		s.deliver(t, msgs)
	}
}

// receive waits up to idleRead for the next trace messages.
func (s *space) receive() ([]netlink.Message, error) {
	if err := s.traces.SetReadDeadline(time.Now().Add(idleRead)); err != nil {
		return nil, err
	}
	return s.traces.Receive()
}

// empty says whether the trace socket has no message queued, peeking
// without taking any: an overflow it finds is counted as lost.
func (s *space) empty(t *Tracer) bool {
	raw, err := s.traces.SyscallConn()
	if err != nil {
		return false
	}
	var peekErr error
	var b [1]byte
	if err := raw.Control(func(fd uintptr) {
		_, _, peekErr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	}); err != nil {
		return false
	}
	if errors.Is(peekErr, unix.ENOBUFS) {
		t.lost.Add(1)
	}
	return errors.Is(peekErr, unix.EAGAIN)
}

// deliver resolves a batch of trace messages and hands on their steps.
func (s *space) deliver(t *Tracer, msgs []netlink.Message) {
	at := kernel.MonotonicNow()
	for _, m := range msgs {
		if m.Header.Type != traceType {
			continue
		}
		st, err := decodeStep(m.Data)
		if err != nil {
			t.report(fmt.Errorf("rule traces of %s: %w", s.target.Name, err))
			continue
		}
		if tr, ok := s.resolve(st, at); ok {
			t.steps(tr)
		}
	}
}

func isClosing(t *Tracer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// resolve places a step: the hook it happened at (its base chain's, or for
// a chain jumped to, the hook the packet's trace is in), the packet (as
// the last step that carried its headers saw it) and the rule's position
// in its chain. Steps of nettraces' own tables, of families other than
// ip and ip6 and of packets never seen with an IP header are left out.
func (s *space) resolve(st step, at uint64) (ruleset.Trace, bool) {
	if nettraceTable(st.table) || (st.nfproto != unix.NFPROTO_IPV4 && st.nfproto != unix.NFPROTO_IPV6) {
		return ruleset.Trace{}, false
	}
	if s.stale.Swap(false) {
		clear(s.hooks)
		clear(s.positions)
	}
	k := chainKey{uint8(st.nfproto), st.table, st.chain}
	hook, base := s.hooks[k]
	if !base {
		if _, known := s.positions[k]; !known {
			s.readChains()
			hook, base = s.hooks[k]
		}
	}
	// Trace ids are hashes: the map is emptied now and then rather than
	// aged.
	if len(s.current) > 1<<14 {
		clear(s.current)
	}
	w, seen := s.current[st.id]
	if base {
		w.hook = hook
	}
	if st.hasPacket {
		w.packet, seen = st.packet, true
	}
	if !seen || w.hook == "" {
		return ruleset.Trace{}, false
	}
	s.current[st.id] = w
	tr := ruleset.Trace{Netns: s.target.Inode, Time: at, ID: st.id, Hook: w.hook, Packet: w.packet, Kind: st.kind,
		Table: st.table, Chain: st.chain, Handle: st.handle, Verdict: st.verdict}
	if st.kind == ruleset.TraceRule {
		tr.Position = s.position(k, st.handle)
	}
	return tr, true
}

// readChains learns the hooks of the namespace's IPv4 and IPv6 base
// chains, and marks every chain known.
func (s *space) readChains() {
	for _, f := range families {
		chains, err := s.lookup.ListChainsOfTableFamily(nftables.TableFamily(f.proto))
		if err != nil {
			continue
		}
		for _, c := range chains {
			k := chainKey{f.proto, c.Table.Name, c.Name}
			if c.Hooknum != nil {
				s.hooks[k] = event.Hook(*c.Hooknum).String()
			}
			if _, ok := s.positions[k]; !ok {
				s.positions[k] = nil
			}
		}
	}
}

// position is the 1-based position of the rule with handle in its chain;
// 0 when the chain no longer has it.
func (s *space) position(k chainKey, handle uint64) int {
	if p, ok := s.positions[k][handle]; ok {
		return p
	}
	rules, err := s.lookup.GetRules(&nftables.Table{Name: k.table, Family: nftables.TableFamily(k.family)}, &nftables.Chain{Name: k.chain})
	if err != nil {
		return 0
	}
	byHandle := make(map[uint64]int, len(rules))
	for i, r := range rules {
		byHandle[r.Handle] = i + 1
	}
	s.positions[k] = byHandle
	return byHandle[handle]
}
