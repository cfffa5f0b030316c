package flow

import (
	"sync"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// SNATs remembers, for a while, the conntrack entries SNAT gave a source,
// by the translated tuple: two connections given one source port clash in
// conntrack (the second's entry is dropped when it is confirmed), and the
// connection the second lost to is another flow, often one that ended
// well before the loser is explained. Only the first packets of entries
// are kept (those that created their entry and were SNATed), one per
// masqueraded connection, so the index stays small on a busy node.
//
// Records are forgotten by kernel time, a horizon behind the newest, never
// by when a flow happens to be explained: a lookup bounded by a time
// before the newest record then gives the same answer live and in replay.
// Safe for concurrent use: the correlator adds, the goroutines that
// explain flows look up.
type SNATs struct {
	mu      sync.Mutex
	horizon uint64
	byTuple map[snatKey][]snatRecord
	// order holds the records' keys in the order they came, to forget the
	// oldest first; its head starts at first.
	order  []snatKey
	first  int
	newest uint64
}

// snatKey is a translated tuple in its namespace: addresses, ports and
// protocol, not the packet's flags.
type snatKey struct {
	netns    uint32
	src, dst [16]byte
	sport    uint16
	dport    uint16
	proto    uint8
}

// snatRecord is one entry's first SNATed packet, in compact form (an
// Event is 640 bytes).
type snatRecord struct {
	time    uint64
	ct      uint64
	compact []byte
}

// maxSNATs bounds the records kept whatever the horizon: about 10 MB.
const maxSNATs = 1 << 16

// minSNATHorizon is the least time a record is kept: a flow is explained
// after its idle time (seconds), and its drop may come seconds after the
// connection it lost to.
const minSNATHorizon = 30 * time.Second

func newSNATs(idle time.Duration) *SNATs {
	horizon := max(minSNATHorizon, 4*idle)
	return &SNATs{horizon: uint64(horizon), byTuple: map[snatKey][]snatRecord{}}
}

func snatKeyOf(netns uint32, t event.Tuple) snatKey {
	return snatKey{netns: netns, src: t.Src.As16(), dst: t.Dst.As16(), sport: t.Sport, dport: t.Dport, proto: t.Proto}
}

// add keeps e when it is an entry's first packet translated by SNAT.
func (x *SNATs) add(e *event.Event) {
	if e.Point != event.PointNAT || !e.HasCT() || !e.CT.Created() || e.Translation()&event.TranslationSNAT == 0 {
		return
	}
	k := snatKeyOf(e.Netns, e.Tuple)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.newest = max(x.newest, e.Time)
	for _, r := range x.byTuple[k] {
		if r.ct == e.CT.ID {
			return // a retransmission: its entry is known from its first packet
		}
	}
	x.forget()
	x.byTuple[k] = append(x.byTuple[k], snatRecord{time: e.Time, ct: e.CT.ID, compact: event.AppendCompact(nil, e, &event.CompactBase{})})
	x.order = append(x.order, k)
}

// forget drops the oldest records: those past the horizon, and one more
// when the index is full.
func (x *SNATs) forget() {
	for x.first < len(x.order) {
		k := x.order[x.first]
		rs := x.byTuple[k]
		if len(x.order)-x.first < maxSNATs && rs[0].time+x.horizon >= x.newest {
			break
		}
		if len(rs) == 1 {
			delete(x.byTuple, k)
		} else {
			x.byTuple[k] = rs[1:]
		}
		x.first++
	}
	if x.first > len(x.order)/2 {
		x.order = append(x.order[:0], x.order[x.first:]...)
		x.first = 0
	}
}

// Before returns the first packet of the latest entry other than ct that
// SNAT gave tuple t in netns before kernel time at: the connection a packet
// given t, with entry ct, clashed with.
func (x *SNATs) Before(netns uint32, t event.Tuple, ct uint64, at uint64) (event.Event, bool) {
	if x == nil {
		return event.Event{}, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	rs := x.byTuple[snatKeyOf(netns, t)]
	for i := len(rs) - 1; i >= 0; i-- {
		if r := rs[i]; r.ct != ct && r.time < at {
			var e event.Event
			if _, err := event.DecodeCompact(r.compact, 0, &e, &event.CompactBase{}); err != nil {
				return event.Event{}, false
			}
			return e, true
		}
	}
	return event.Event{}, false
}
