package trace

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// Stream merges recordings into one event stream in time order. A single
// recording keeps its kernel clock, so it replays exactly as it was seen
// live; so do the parts of one split recording (RecordOptions.FileBytes:
// files of one Meta.Run), which are one recording again. Several
// recordings (from several hosts) are put on the wall clock, and the
// identities that only mean something on their own host (namespace
// inodes, packet and conntrack addresses, drop-reason numbers, symbol
// addresses) are kept apart.
type Stream struct {
	readers []*Reader
	// source is each reader's recording, an index into sources.
	source  []int
	sources []source
	heads   []event.Event
	live    []bool
	// taken is the reader whose head was last delivered: it advances on
	// the next call, so the delivered packet bytes stay valid until then.
	taken int
	// Errs are the recordings that ended on an error (cut off, corrupt):
	// their events up to it were delivered.
	Errs []error

	multi bool
	// skew is each recording's clock offset from the first's (alignClocks),
	// taken off its wall-clock times; nil until aligned.
	skew []int64
	// counted is how far each recording's losses are counted (the
	// furthest of its parts), +inf once it has ended; onLoss is told the
	// windows and how far every recording's losses are counted.
	counted []uint64
	onLoss  func(win event.LossWindow, through uint64)
	early   []event.LossWindow // read before onLoss was set
	// onTick is told of the recording's ticks (Ticks); earlyTicks were
	// read with the first event, before Next returned it.
	onTick     func(at uint64)
	earlyTicks []uint64

	// names guards netns, reasons and symbols: they grow as events are
	// read, and are looked up by whatever explains and shows the events
	// meanwhile.
	names   sync.RWMutex
	netns   map[uint32]string
	reasons map[uint32]string
	symbols map[uint64]string
	remapNs map[[2]uint32]uint32
	unmapNs map[uint32][2]uint32 // stream namespace -> recording, its namespace
	remapRs map[[2]uint32]uint32
	// books are the recordings' pod and node addresses merged, replaced
	// (never changed) when a reader read new ones: booksSeen is each
	// reader's count of address records merged. Readers change theirs
	// only in Next, which runs in the goroutine that merges them, so the
	// lookups of whatever explains the events meanwhile cost one atomic
	// load.
	books     atomic.Pointer[bookSnapshot]
	booksSeen []uint64
}

// bookSnapshot is a merge of the recordings' pod and node addresses and
// Service frontends, with a generation that changes when any does.
type bookSnapshot struct {
	gen         uint64
	pods, nodes map[netip.Addr]string
	services    *service.Table
}

// ErrPartTwice is one part of a run given twice (the same file, or a copy
// of it): its packets would replay twice, and change the findings.
var ErrPartTwice = errors.New("the same part of a recording given twice")

// checkParts refuses a part given twice; the parts are sorted.
func (s source) checkParts() error {
	for i := 1; i < len(s); i++ {
		if s[i].Meta.Part == s[i-1].Meta.Part {
			return fmt.Errorf("%w: %s and %s are both part %d of run %s of %s; give each once", ErrPartTwice, s[i-1].File, s[i].File, s[i].Meta.Part, s[i].Meta.Run, s.meta().Host)
		}
	}
	return nil
}

// Gaps names the parts missing between the parts given of each split
// recording: their flows lack what those parts held. The oldest parts
// missing (removed as -W keeps the newest) are no gap.
func (s *Stream) Gaps() []string {
	var gaps []string
	for _, src := range s.sources {
		for i := 1; i < len(src); i++ {
			a, b := src[i-1].Meta.Part, src[i].Meta.Part
			missing := fmt.Sprintf("parts %d to %d are", a+1, b-1)
			switch {
			case b <= a+1:
				continue
			case b == a+2:
				missing = fmt.Sprintf("part %d is", a+1)
			}
			gaps = append(gaps, fmt.Sprintf("%s missing of run %s of %s, between %s and %s", missing, src[i].Meta.Run, src.meta().Host, src[i-1].File, src[i].File))
		}
	}
	return gaps
}

// source is one recording: a file, or the parts of a split one. Each part
// carries the names and rulesets its own events need, so a name is looked
// for in every part, newest first.
type source []*Reader

func (s source) meta() *Meta { return &s[0].Meta }

func (s source) netnsName(ino uint32) string {
	for i := len(s) - 1; i >= 0; i-- {
		if n := s[i].NetnsName(ino); n != "" {
			return n
		}
	}
	return ""
}

func (s source) symbolName(addr uint64) string {
	for i := len(s) - 1; i >= 0; i-- {
		if n := s[i].SymbolName(addr); n != "" {
			return n
		}
	}
	return ""
}

// ruleset is the namespace's ruleset in force at a time: the newest part
// that knows one then (each part starts with the rulesets in force at its
// start, with their own times).
func (s source) ruleset(ino uint32, at uint64) *ruleset.Ruleset {
	for i := len(s) - 1; i >= 0; i-- {
		if rs := s[i].Rulesets.At(ino, at); rs != nil {
			return rs
		}
	}
	return nil
}

func (s source) ruleTrace(ino uint32, hook string, p ruleset.Packet, at uint64) []ruleset.Trace {
	for i := len(s) - 1; i >= 0; i-- {
		if t := s[i].RuleTraces.Pass(ino, hook, p, at); len(t) > 0 {
			return t
		}
	}
	return nil
}

// NewStream merges readers.
func NewStream(readers []*Reader) *Stream {
	s, _, _ := newStream(readers, nil)
	return s
}

// NewAlignedStream merges readers as NewStream does, with the clocks of
// recordings of several hosts aligned (alignClocks: id names a packet the
// same on every host, false for an event that does not), and says what it
// found of each recording's clock.
func NewAlignedStream(readers []*Reader, id func(*event.Event) (uint64, bool)) (*Stream, []ClockSkew, error) {
	return newStream(readers, id)
}

func newStream(readers []*Reader, id func(*event.Event) (uint64, bool)) (*Stream, []ClockSkew, error) {
	s := &Stream{readers: readers, source: make([]int, len(readers)), booksSeen: make([]uint64, len(readers)), heads: make([]event.Event, len(readers)), live: make([]bool, len(readers)),
		taken: -1, netns: map[uint32]string{}, reasons: map[uint32]string{}, symbols: map[uint64]string{},
		remapNs: map[[2]uint32]uint32{}, unmapNs: map[uint32][2]uint32{}, remapRs: map[[2]uint32]uint32{}}
	runs := map[[2]string]int{}
	for i, r := range readers {
		k, ok := [2]string{r.Meta.Host, r.Meta.Run}, r.Meta.Run != ""
		if at, seen := runs[k]; ok && seen {
			s.source[i] = at
			s.sources[at] = append(s.sources[at], r)
			continue
		}
		if ok {
			runs[k] = len(s.sources)
		}
		s.source[i] = len(s.sources)
		s.sources = append(s.sources, source{r})
	}
	for _, src := range s.sources {
		sort.Slice(src, func(a, b int) bool { return src[a].Meta.Part < src[b].Meta.Part })
		if err := src.checkParts(); err != nil {
			return nil, nil, err
		}
	}
	s.multi = len(s.sources) > 1
	s.counted = make([]uint64, len(s.sources))
	var skews []ClockSkew
	if id != nil && s.multi {
		var err error
		if skews, err = s.alignClocks(id); err != nil {
			return nil, nil, err
		}
	}
	for i, r := range readers {
		r.OnLoss = func(win event.LossWindow, through uint64) { s.lossRead(i, win, through) }
		r.OnTick = s.tickRead
	}
	for i := range readers {
		s.advance(i)
	}
	return s, skews, nil
}

// CountsLosses says whether every recording has loss records, and so
// whether replay can tell complete flows from incomplete ones.
func (s *Stream) CountsLosses() bool {
	for _, src := range s.sources {
		if !src.meta().LossMarks {
			return false
		}
	}
	return len(s.sources) > 0
}

// OnLoss has f told, on the goroutine that reads events, of each loss
// window and of how far the losses of every recording are counted (in the
// stream's time). Set it before the first Next.
func (s *Stream) OnLoss(f func(win event.LossWindow, through uint64)) {
	s.onLoss = f
	for _, w := range s.early {
		s.tellLosses(w)
	}
	s.tellLosses(event.LossWindow{})
	s.early = nil
}

// Ticks says whether the stream is one recording file with its run's
// ticks (Meta.Ticks). Several recordings' ticks are each their own host's,
// and a split recording's parts are merged by time, which may put a late
// event of one part before a tick of the other: only one file keeps each
// tick in its place.
func (s *Stream) Ticks() bool {
	return len(s.readers) == 1 && s.readers[0].Meta.Ticks
}

// OnTick has f told, on the goroutine that reads events, of each tick when
// the stream has them (Ticks): during the Next that returns the event
// after it. Set it before the first Next.
func (s *Stream) OnTick(f func(at uint64)) {
	if s.Ticks() {
		s.onTick = f
	}
}

func (s *Stream) tickRead(at uint64) {
	switch {
	case s.onTick != nil:
		s.onTick(at)
	case s.Ticks():
		s.earlyTicks = append(s.earlyTicks, at)
	}
}

func (s *Stream) lossRead(i int, win event.LossWindow, through uint64) {
	if s.multi {
		m := &s.readers[i].Meta
		skew := s.skewOf(s.source[i])
		wall := func(t uint64) uint64 { return uint64(m.Wall(t).UnixNano() - skew) }
		win.From, win.To, through = wall(win.From), wall(win.To), wall(through)
	}
	n := s.source[i]
	s.counted[n] = max(s.counted[n], through)
	s.tellLosses(win)
}

// tellLosses passes a window on with how far every recording's losses are
// counted: the least of them.
func (s *Stream) tellLosses(win event.LossWindow) {
	if s.onLoss == nil {
		if win.N > 0 {
			s.early = append(s.early, win)
		}
		return
	}
	through := ^uint64(0)
	for _, c := range s.counted {
		through = min(through, c)
	}
	s.onLoss(win, through)
}

// ended marks a recording's losses all counted once its readers have all
// ended.
func (s *Stream) ended(i int) {
	n := s.source[i]
	for j, live := range s.live {
		if live && s.source[j] == n {
			return
		}
	}
	s.counted[n] = ^uint64(0)
	s.tellLosses(event.LossWindow{})
}

func (s *Stream) advance(i int) {
	err := s.readers[i].Next(&s.heads[i])
	if g := s.readers[i].booksRead(); g != s.booksSeen[i] {
		s.booksSeen[i] = g
		s.mergeBooks()
	}
	s.live[i] = err == nil
	if err != nil && !errors.Is(err, io.EOF) {
		s.Errs = append(s.Errs, err)
	}
	if err != nil {
		s.ended(i)
	}
	if err == nil && s.multi {
		s.rebase(i, &s.heads[i])
	}
}

// salt separates the kernel addresses of different recordings.
func salt(src int) uint64 { return uint64(src+1) << 44 }

func (s *Stream) rebase(i int, e *event.Event) {
	r, n := s.readers[i], s.source[i]
	src := s.sources[n]
	e.Time = uint64(r.Meta.Wall(e.Time).UnixNano() - s.skewOf(n))
	if e.Netns != 0 {
		k := [2]uint32{uint32(n), e.Netns}
		id, ok := s.remapNs[k]
		if !ok {
			id = uint32(len(s.remapNs) + 1)
			s.remapNs[k] = id
		}
		name := s.hostName(n) + ":" + src.netnsName(e.Netns)
		s.names.Lock()
		s.netns[id] = name
		s.unmapNs[id] = k
		s.names.Unlock()
		e.Netns = id
	}
	if e.Skb != 0 {
		e.Skb ^= salt(n)
	}
	if e.CT.ID != 0 {
		e.CT.ID ^= salt(n)
	}
	if e.TCP.Cookie != 0 {
		e.TCP.Cookie ^= salt(n)
	}
	if e.Point == event.PointDrop {
		k := [2]uint32{uint32(n), e.Drop.Reason}
		id, ok := s.remapRs[k]
		name := src.symbolName(e.Drop.Location)
		e.Drop.Location ^= salt(n)
		s.names.Lock()
		if !ok {
			id = uint32(len(s.remapRs) + 1)
			s.remapRs[k] = id
			s.reasons[id] = src.meta().DropReasons[e.Drop.Reason]
		}
		s.symbols[e.Drop.Location] = name
		s.names.Unlock()
		e.Drop.Reason = id
	}
}

func (s *Stream) hostName(n int) string {
	src := s.sources[n]
	if h := src.meta().Host; h != "" {
		return h
	}
	return filepath.Base(src[0].File)
}

// Next delivers the earliest event of all recordings; io.EOF after the
// last. e.Packet is valid until the next call.
func (s *Stream) Next(e *event.Event) error {
	if len(s.earlyTicks) > 0 && s.onTick != nil {
		for _, at := range s.earlyTicks {
			s.onTick(at)
		}
		s.earlyTicks = nil
	}
	if s.taken >= 0 {
		s.advance(s.taken)
		s.taken = -1
	}
	best := -1
	for i, ok := range s.live {
		if ok && (best < 0 || s.heads[i].Time < s.heads[best].Time) {
			best = i
		}
	}
	if best < 0 {
		return io.EOF
	}
	*e = s.heads[best]
	s.taken = best
	return nil
}

// Merged says whether the stream merges several recordings, each with its
// own clock and kernel identities.
func (s *Stream) Merged() bool { return s.multi }

// NetnsName names a namespace of the stream. The name methods are safe to
// call while another goroutine reads events.
func (s *Stream) NetnsName(ino uint32) string {
	if s.multi {
		s.names.RLock()
		defer s.names.RUnlock()
		return s.netns[ino]
	}
	return s.sources[0].netnsName(ino)
}

// NetnsHost names the host a namespace of a merged stream is on ("" for a
// stream of one recording, whose namespaces are all its host's).
func (s *Stream) NetnsHost(ino uint32) string {
	if !s.multi {
		return ""
	}
	s.names.RLock()
	k, ok := s.unmapNs[ino]
	s.names.RUnlock()
	if !ok {
		return ""
	}
	return s.hostName(int(k[0]))
}

// Recordings are what each recording of the stream says of itself (its
// first part's), in the order given.
func (s *Stream) Recordings() []Meta {
	metas := make([]Meta, len(s.sources))
	for i, src := range s.sources {
		metas[i] = *src.meta()
	}
	return metas
}

// NetnsNames are the names of the namespaces the stream's recordings
// named so far, sorted, each once (a merged stream's with their hosts').
func (s *Stream) NetnsNames() []string {
	var names []string
	for n, src := range s.sources {
		for _, r := range src {
			for _, name := range r.NetnsNames() {
				if s.multi {
					name = s.hostName(n) + ":" + name
				}
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// PodAddresses are the pod addresses of the stream's recordings, the
// newest part's first, with a generation that changes when they do. Pod
// addresses are not kept apart by host: a cluster gives each pod its own.
func (s *Stream) PodAddresses() (uint64, map[netip.Addr]string) {
	if b := s.books.Load(); b != nil {
		return b.gen, b.pods
	}
	return 0, nil
}

// NodeAddresses are the node addresses of the stream's recordings, as
// PodAddresses.
func (s *Stream) NodeAddresses() (uint64, map[netip.Addr]string) {
	if b := s.books.Load(); b != nil {
		return b.gen, b.nodes
	}
	return 0, nil
}

// ServiceFrontends are the Service frontends of the stream's recordings,
// as PodAddresses: the recordings of one cluster's nodes list the same.
func (s *Stream) ServiceFrontends() (uint64, *service.Table) {
	if b := s.books.Load(); b != nil {
		return b.gen, b.services
	}
	return 0, nil
}

// mergeBooks replaces the merged pod and node addresses and Service
// frontends after a reader read new ones.
func (s *Stream) mergeBooks() {
	next := &bookSnapshot{pods: map[netip.Addr]string{}, nodes: map[netip.Addr]string{}}
	var frontends []service.Frontend
	for _, src := range s.sources {
		for _, r := range src {
			_, pods := r.PodAddresses()
			maps.Copy(next.pods, pods)
			_, nodes := r.NodeAddresses()
			maps.Copy(next.nodes, nodes)
			_, services := r.ServiceFrontends()
			frontends = append(frontends, services.Frontends()...)
		}
	}
	if len(frontends) > 0 {
		next.services = service.NewTable(frontends)
	}
	next.gen, _ = s.PodAddresses()
	next.gen++
	s.books.Store(next)
}

// PodName names the pod an address belongs to ("" when none).
func (s *Stream) PodName(a netip.Addr) string {
	_, pods := s.PodAddresses()
	return pods[a]
}

// ReasonName names a drop reason of the stream.
func (s *Stream) ReasonName(r uint32) string {
	if s.multi {
		s.names.RLock()
		defer s.names.RUnlock()
		return s.reasons[r]
	}
	return s.sources[0].meta().DropReasons[r]
}

// SymbolName names a drop location of the stream.
func (s *Stream) SymbolName(addr uint64) string {
	if s.multi {
		s.names.RLock()
		defer s.names.RUnlock()
		return s.symbols[addr]
	}
	if n := s.sources[0].symbolName(addr); n != "" {
		return n
	}
	return fmt.Sprintf("%#x", addr)
}

// Ruleset returns a namespace's ruleset in force at a stream time; nil
// when its recording holds none. Safe to call while another goroutine
// reads events.
func (s *Stream) Ruleset(ino uint32, at uint64) *ruleset.Ruleset {
	src, ino, at, ok := s.recordingOf(ino, at)
	if !ok {
		return nil
	}
	return src.ruleset(ino, at)
}

// RuleTrace returns what nftables tracing reported of a packet seen with
// tuple p at hook in a namespace at a stream time (ruleset.Traces.Pass).
// Safe to call while another goroutine reads events.
func (s *Stream) RuleTrace(ino uint32, hook string, p ruleset.Packet, at uint64) []ruleset.Trace {
	src, ino, at, ok := s.recordingOf(ino, at)
	if !ok {
		return nil
	}
	return src.ruleTrace(ino, hook, p, at)
}

// recordingOf is the recording a stream namespace comes from, with the
// namespace and time in that recording's terms.
func (s *Stream) recordingOf(ino uint32, at uint64) (source, uint32, uint64, bool) {
	if !s.multi {
		return s.sources[0], ino, at, true
	}
	s.names.RLock()
	k, ok := s.unmapNs[ino]
	s.names.RUnlock()
	if !ok {
		return nil, 0, 0, false
	}
	src := s.sources[k[0]]
	return src, k[1], src.meta().Mono(time.Unix(0, int64(at)+s.skewOf(int(k[0])))), true
}

// skewOf is recording n's clock offset, zero until aligned.
func (s *Stream) skewOf(n int) int64 {
	if s.skew == nil {
		return 0
	}
	return s.skew[n]
}

// Wall converts a stream time to wall-clock time.
func (s *Stream) Wall(t uint64) time.Time {
	if s.multi {
		return time.Unix(0, int64(t))
	}
	return s.sources[0].meta().Wall(t)
}

// Lost adds up the lost events of the recordings, per point.
func (s *Stream) Lost() map[event.Point]uint64 {
	return s.summed(func(sum *Summary) map[string]uint64 { return sum.Lost })
}

// Shed adds up the events the recordings' runs shed, per point.
func (s *Stream) Shed() map[event.Point]uint64 {
	return s.summed(func(sum *Summary) map[string]uint64 { return sum.Shed })
}

func (s *Stream) summed(counts func(*Summary) map[string]uint64) map[event.Point]uint64 {
	out := map[event.Point]uint64{}
	for _, r := range s.readers {
		if r.Summary == nil {
			continue
		}
		for _, p := range event.Points {
			out[p] += counts(r.Summary)[p.String()]
		}
	}
	return out
}
