// Package rulewatch reads the iptables ruleset of each watched namespace,
// by running iptables-save inside it (and its native nftables tables, with
// nft when the host has it): when watching starts, and again
// whenever the namespace's nftables ruleset changes (iptables-nft rules are
// nftables rules, and an nftables monitor per namespace says when they
// change). Rules of iptables-legacy are read once, at the start; a
// namespace with both kinds is reported, not half read. It only reads:
// nothing in any ruleset changes.
package rulewatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/ruletrace"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// settle is how long a namespace's ruleset must stay unchanged before it
// is read again: iptables-restore (kube-proxy's every sync) changes it in a
// burst of rule events.
const settle = 200 * time.Millisecond

// ErrNoIptablesSave reports a host without iptables-save: rules are not
// attributed.
var ErrNoIptablesSave = errors.New("iptables-save not found: rules are not named")

// Watcher follows the rulesets of namespaces.
type Watcher struct {
	changes  chan ruleset.Snapshot
	done     chan struct{}
	wg       sync.WaitGroup
	report   func(error)
	mu       sync.Mutex
	closers  map[uint32][]func() error // by namespace
	closed   bool
	followed map[uint32]bool // namespaces by inode
}

// Start reads the rulesets of targets, and watches them for changes
// until Close. A namespace whose ruleset cannot be read or watched is
// reported (from any goroutine), and the others go on.
func Start(targets []netns.Target, report func(error)) (*Watcher, []ruleset.Snapshot, error) {
	if _, err := exec.LookPath("iptables-save"); err != nil {
		return nil, nil, ErrNoIptablesSave
	}
	w := &Watcher{changes: make(chan ruleset.Snapshot, 64), done: make(chan struct{}), report: report, followed: map[uint32]bool{},
		closers: map[uint32][]func() error{}}
	var unique []netns.Target
	for _, t := range targets {
		if !w.followed[t.Inode] {
			w.followed[t.Inode] = true
			unique = append(unique, t)
		}
	}
	// A node has hundreds of namespaces: they are read a few at a time.
	snaps, errs := make([]ruleset.Snapshot, len(unique)), make([]error, len(unique))
	slots := make(chan struct{}, readersAtOnce)
	var reading sync.WaitGroup
	for i, t := range unique {
		reading.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			snaps[i], errs[i] = read(t)
		})
	}
	reading.Wait()
	var first []ruleset.Snapshot
	for i, t := range unique {
		if errs[i] != nil {
			report(errs[i])
			continue
		}
		first = append(first, snaps[i])
		w.follow(t, snaps[i].Text+snaps[i].Text6+snaps[i].Native)
	}
	return w, first, nil
}

// readersAtOnce bounds the iptables-save processes run at once.
const readersAtOnce = 8

// Add follows a namespace that appeared after Start; its ruleset comes on
// Changes.
func (w *Watcher) Add(t netns.Target) {
	w.mu.Lock()
	known := w.followed[t.Inode]
	w.followed[t.Inode] = true
	w.mu.Unlock()
	if known {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		s, err := read(t)
		if err != nil {
			w.report(err)
			return
		}
		select {
		case w.changes <- s:
		case <-w.done:
			return
		}
		w.follow(t, s.Text+s.Text6+s.Native)
	}()
}

func (w *Watcher) fail(err error) { w.report(err) }

// Changes delivers a namespace's ruleset each time it changed.
func (w *Watcher) Changes() <-chan ruleset.Snapshot { return w.changes }

// Close stops watching.
func (w *Watcher) Close() {
	close(w.done)
	w.mu.Lock()
	w.closed = true
	for _, cs := range w.closers {
		for _, c := range cs {
			c()
		}
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// Forget stops following a namespace that is gone: the file it held open
// would keep the namespace, with all it holds, in the kernel.
func (w *Watcher) Forget(ino uint32) {
	w.mu.Lock()
	cs := w.closers[ino]
	delete(w.closers, ino)
	delete(w.followed, ino)
	w.mu.Unlock()
	for _, c := range cs {
		c()
	}
}

// read runs iptables-save and ip6tables-save (when the host has it) in a
// namespace.
func read(t netns.Target) (ruleset.Snapshot, error) {
	at := kernel.MonotonicNow()
	text, err := save(t, "iptables-save")
	if err != nil {
		return ruleset.Snapshot{}, err
	}
	var text6 string
	if _, err := exec.LookPath("ip6tables-save"); err == nil {
		if text6, err = save(t, "ip6tables-save"); err != nil {
			return ruleset.Snapshot{}, err
		}
	}
	native, err := readNative(t, text, text6)
	if err != nil {
		return ruleset.Snapshot{}, err
	}
	return ruleset.NewSnapshot(t.Inode, at, text, text6, native), nil
}

// save runs program (iptables-save, ip6tables-save) in a namespace:
// started from a thread inside it, the process is born there.
func save(t netns.Target, program string) (string, error) {
	var out, stderr bytes.Buffer
	cmd := exec.Command(program)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := netns.Do(t.Path, cmd.Run); err != nil {
		return "", fmt.Errorf("read the ruleset of %s with %s: %w: %s", t.Name, program, err, strings.TrimSpace(stderr.String()))
	}
	if strings.Contains(stderr.String(), legacyPresent) {
		return "", fmt.Errorf("%s has iptables-legacy rules beside iptables-nft ones (%s): its rules are not named", t.Name, program)
	}
	return normalize(out.String()), nil
}

// readNative reads a namespace's native nftables tables with nft, when the
// host has it ("" otherwise): the tables of its listing that are neither
// iptables-nft's (in the texts of iptables-save and ip6tables-save) nor
// nettrace's own (--rules).
func readNative(t netns.Target, iptables, ip6tables string) (string, error) {
	if _, err := exec.LookPath("nft"); err != nil {
		return "", nil
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command("nft", "--handle", "--stateless", "list", "ruleset")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := netns.Do(t.Path, cmd.Run); err != nil {
		return "", fmt.Errorf("read the nftables ruleset of %s: %w: %s", t.Name, err, strings.TrimSpace(stderr.String()))
	}
	skip := map[string]bool{"ip " + ruletrace.TableName: true, "ip6 " + ruletrace.TableName: true}
	for family, text := range map[string]string{"ip": iptables, "ip6": ip6tables} {
		for _, line := range strings.Split(text, "\n") {
			if name, ok := strings.CutPrefix(line, "*"); ok {
				skip[family+" "+name] = true
			}
		}
	}
	var b strings.Builder
	keep := false
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "table" {
			keep = !skip[f[1]+" "+f[2]]
		}
		if keep {
			b.WriteString(line)
		}
		if strings.TrimRight(line, "\n") == "}" {
			keep = false
		}
	}
	return b.String(), nil
}

// legacyPresent is how iptables-nft-save (and ip6tables-nft-save) says on
// stderr that legacy tables exist too ("iptables-legacy tables present"):
// the kernel runs both, and the text holds only one.
const legacyPresent = "-legacy tables present"

// normalize drops the dates iptables-save writes around each table, so
// that an unchanged ruleset reads the same (kube-proxy rewrites its rules
// unchanged on every sync).
func normalize(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		switch {
		case strings.HasPrefix(line, "# Completed on "):
			continue
		case strings.HasPrefix(line, "# Generated by "):
			if head, _, ok := strings.Cut(line, " on "); ok {
				line = head + "\n"
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// follow reads a namespace's ruleset again after each burst of changes;
// text is the ruleset as last read (iptables' and native tables').
func (w *Watcher) follow(t netns.Target, text string) {
	f, err := os.Open(t.Path)
	if err != nil {
		w.report(fmt.Errorf("watch the ruleset of %s for changes: %w", t.Name, err))
		return
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())), nftables.AsLasting())
	if err != nil {
		f.Close()
		w.report(fmt.Errorf("watch the ruleset of %s for changes: %w", t.Name, err))
		return
	}
	mon := nftables.NewMonitor(nftables.WithMonitorObject(nftables.MonitorObjectRuleset), nftables.WithMonitorEventBuffer(256))
	events, err := conn.AddMonitor(mon)
	if err != nil {
		conn.CloseLasting()
		f.Close()
		w.report(fmt.Errorf("watch the ruleset of %s for changes: %w", t.Name, err))
		return
	}
	w.mu.Lock()
	if w.closed {
		// Close came while a namespace added late was being read.
		w.mu.Unlock()
		mon.Close()
		conn.CloseLasting()
		f.Close()
		return
	}
	w.closers[t.Inode] = append(w.closers[t.Inode], mon.Close, conn.CloseLasting, f.Close)
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		last := text
		var quiet <-chan time.Time
		var changed uint64 // when the kernel last told of a change
		for {
			select {
			case _, ok := <-events:
				if !ok {
					return
				}
				changed = kernel.MonotonicNow()
				quiet = time.After(settle)
			case <-quiet:
				quiet = nil
				s, err := read(t)
				if err != nil {
					w.report(err)
					continue
				}
				if s.Text+s.Text6+s.Native == last {
					continue // rewritten unchanged
				}
				last = s.Text + s.Text6 + s.Native
				// In force since the change, not since it was read: a
				// packet the new rules decided in the settle time and the
				// read's (a loaded node's seconds) is attributed to them.
				s.Time = changed
				select {
				case w.changes <- s:
				case <-w.done:
					return
				}
			case <-w.done:
				return
			}
		}
	}()
}
