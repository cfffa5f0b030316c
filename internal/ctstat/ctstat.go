// Package ctstat reads a namespace's conntrack table for the drops
// conntrack may have decided itself. A packet a netfilter hook dropped
// before it had a conntrack entry was dropped by a rule ahead of conntrack
// (the raw table) or by conntrack, which drops a packet it finds no room
// to track ("nf_conntrack: table full, dropping packet"). The kernel's
// drop event tells neither apart; the table's entries and limit, and
// conntrack's drop counter, read right after it, do. Read by user space,
// they are written into the drop event, so that a recording keeps them.
package ctstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// fresh is how long a namespace's reading serves later drops: a full
// table drops packets by the thousand, and each reading enters the
// namespace.
const fresh = 100 * time.Millisecond

// table is one reading of a namespace's conntrack table.
type table struct {
	count, max uint32
	drops      uint64 // conntrack's drop counter, all CPUs
	at         time.Time
}

// Reader completes the drops of the namespaces it watches.
type Reader struct {
	watched netns.Watched
	// base is each namespace's drop counter when watching began.
	base map[uint32]uint64
	last map[uint32]table
	// netfilterDrop says whether a kernel drop reason is NETFILTER_DROP.
	netfilterDrop func(reason uint32) bool
	now           func() time.Time
	read          func(path string) (table, error)
}

// New watches the given namespaces; reasonName names the kernel's drop
// reasons.
func New(targets []netns.Target, reasonName func(uint32) string) *Reader {
	r := &Reader{base: map[uint32]uint64{}, last: map[uint32]table{},
		netfilterDrop: func(reason uint32) bool { return reasonName(reason) == "NETFILTER_DROP" }, now: time.Now, read: read}
	for _, t := range targets {
		r.AddNamespace(t)
	}
	return r
}

// AddNamespace starts watching a namespace, taking its drop counter's
// baseline (none where conntrack does not run: its first reading is then
// the baseline's zero).
func (r *Reader) AddNamespace(t netns.Target) {
	if !r.watched.Add(t) {
		return
	}
	if tb, err := r.read(t.Path); err == nil {
		r.base[t.Inode] = tb.drops
	}
}

// ForgetNamespace stops reading a namespace that is gone.
func (r *Reader) ForgetNamespace(ino uint32) {
	r.watched.Remove(ino)
	delete(r.base, ino)
}

// Complete writes the conntrack table into a netfilter drop of a packet
// without an entry, in a watched namespace. Other events are left as
// they are.
func (r *Reader) Complete(e *event.Event) {
	if e.Point != event.PointDrop || e.HasCT() || !r.netfilterDrop(e.Drop.Reason) {
		return
	}
	path, ok := r.watched.Path(e.Netns)
	if !ok {
		return
	}
	tb, ok := r.last[e.Netns]
	if now := r.now(); !ok || now.Sub(tb.at) >= fresh {
		var err error
		if tb, err = r.read(path); err != nil {
			return
		}
		tb.at = now
		r.last[e.Netns] = tb
	}
	e.Drop.CTCount, e.Drop.CTMax = tb.count, tb.max
	e.Drop.CTDrops = tb.drops - min(tb.drops, r.base[e.Netns])
}

// read takes a namespace's conntrack table: its entries and limit (the
// limit is the initial namespace's, which every namespace's count is held
// to) and its drop counter. /proc/sys/net and /proc/net are the reading
// thread's namespace's.
func read(path string) (table, error) {
	var tb table
	err := netns.Do(path, func() error {
		count, err := readUint("/proc/sys/net/netfilter/nf_conntrack_count")
		if err != nil {
			return err
		}
		limit, err := readUint("/proc/sys/net/netfilter/nf_conntrack_max")
		if err != nil {
			return err
		}
		raw, err := os.ReadFile("/proc/thread-self/net/stat/nf_conntrack")
		if err != nil {
			return err
		}
		tb.count, tb.max = uint32(count), uint32(limit)
		tb.drops, err = parseStat(raw, "drop")
		return err
	})
	if err != nil {
		return table{}, fmt.Errorf("read conntrack table: %w", err)
	}
	return tb, nil
}

func readUint(path string) (uint64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 32)
}

// parseStat sums a column of /proc/net/stat/nf_conntrack over its lines,
// one a CPU, in hexadecimal under a header naming the columns.
func parseStat(raw []byte, column string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	if !sc.Scan() {
		return 0, fmt.Errorf("conntrack statistics: empty")
	}
	col := -1
	for i, name := range strings.Fields(sc.Text()) {
		if name == column {
			col = i
		}
	}
	if col < 0 {
		return 0, fmt.Errorf("conntrack statistics: no column %q", column)
	}
	var sum uint64
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if col >= len(fields) {
			return 0, fmt.Errorf("conntrack statistics: a line of %d columns", len(fields))
		}
		v, err := strconv.ParseUint(fields[col], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("conntrack statistics: %w", err)
		}
		sum += v
	}
	return sum, nil
}
