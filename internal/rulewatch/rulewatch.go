// Package rulewatch reads the iptables ruleset of each watched namespace,
// by running iptables-save inside it: when watching starts, and again
// whenever the namespace's nftables ruleset changes (iptables-nft rules are
// nftables rules, and an nftables monitor per namespace says when they
// change). Rules of iptables-legacy are read once, at the start. It only
// reads: nothing in any ruleset changes.
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
	closers  []func() error
	followed map[uint32]bool // namespaces by inode
}

// Start reads the rulesets of targets, and watches them for changes
// until Close. A namespace whose ruleset cannot be read or watched is
// reported (from any goroutine), and the others go on.
func Start(targets []netns.Target, report func(error)) (*Watcher, []ruleset.Snapshot, error) {
	if _, err := exec.LookPath("iptables-save"); err != nil {
		return nil, nil, ErrNoIptablesSave
	}
	w := &Watcher{changes: make(chan ruleset.Snapshot, 64), done: make(chan struct{}), report: report, followed: map[uint32]bool{}}
	var first []ruleset.Snapshot
	for _, t := range targets {
		if w.followed[t.Inode] {
			continue
		}
		w.followed[t.Inode] = true
		s, err := read(t)
		if err != nil {
			report(err)
			continue
		}
		first = append(first, s)
		w.follow(t)
	}
	return w, first, nil
}

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
		w.follow(t)
	}()
}

func (w *Watcher) fail(err error) { w.report(err) }

// Changes delivers a namespace's ruleset each time it changed.
func (w *Watcher) Changes() <-chan ruleset.Snapshot { return w.changes }

// Close stops watching.
func (w *Watcher) Close() {
	close(w.done)
	w.mu.Lock()
	for _, c := range w.closers {
		c()
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// read runs iptables-save in a namespace.
func read(t netns.Target) (ruleset.Snapshot, error) {
	at := kernel.MonotonicNow()
	var out, stderr bytes.Buffer
	cmd := exec.Command("nsenter", "--net="+t.Path, "iptables-save")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return ruleset.Snapshot{}, fmt.Errorf("read the ruleset of %s: %w: %s", t.Name, err, strings.TrimSpace(stderr.String()))
	}
	return ruleset.NewSnapshot(t.Inode, at, out.String()), nil
}

// follow reads a namespace's ruleset again after each burst of changes.
func (w *Watcher) follow(t netns.Target) {
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
	w.closers = append(w.closers, mon.Close, conn.CloseLasting, f.Close)
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		var quiet <-chan time.Time
		for {
			select {
			case _, ok := <-events:
				if !ok {
					return
				}
				quiet = time.After(settle)
			case <-quiet:
				quiet = nil
				s, err := read(t)
				if err != nil {
					w.report(err)
					continue
				}
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
