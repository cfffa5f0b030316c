package trace

import (
	"math"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Recordings of several hosts are put on the wall clock, each host's as it
// was. Two hosts' clocks agree only as well as something keeps them in
// step (NTP: milliseconds; a virtual machine that set its clock from an
// emulated RTC at boot: up to a second), while a packet crosses from one
// to the other in microseconds: on the hosts' own clocks, a reply could
// come before its request. A packet seen on both bounds how far apart the
// clocks are: it left one host (its last event there a transmission)
// before it arrived at the other (its first event there a reception), so
// the receiver's clock minus the sender's is at most the difference of
// those two times. Packets both ways bound it on both sides; alignClocks
// takes the middle of the bounds (or the one bound there is), each
// recording against the first through the recordings it shares packets
// with.
//
// The offset is chosen on the recordings' own wall clocks, where the
// timeline is drawn: every packet must arrive there after it left, so the
// offset stays within the bounds as the packets give them. The anchors'
// errors (Meta.AnchorErrNS) widen only the range reported for the true
// offset: an offset at a bound widened by them would put the packet that
// set the bound on the wrong side of its own crossing, by as much.

// ClockSkew is what NewAlignedStream found of one recording's clock.
type ClockSkew struct {
	Host string
	// Offset is how far the recording's clock ran ahead of the first
	// recording's; its events were moved back by it. It is the middle of
	// the bounds, or the one bound there is (the packets' time on the wire
	// taken as nothing: Placement).
	Offset time.Duration
	// Packets counts the packets seen on both that bound it; zero when no
	// packet joins the recording to the first, and its clock is taken as
	// it was.
	Packets int
	// Lower and Upper bound the true offset, widened by the anchors'
	// errors (HasLower, HasUpper: packets gave that bound).
	Lower, Upper       time.Duration
	HasLower, HasUpper bool
}

// Placement is how much a recording's placed times can be trusted.
type Placement int

const (
	// Unplaced: no packet joins the recording to the others; its times
	// are its own clock's.
	Unplaced Placement = iota
	// Bounded: packets both ways put the offset between two bounds; each
	// time is right within half their distance.
	Bounded
	// Earliest: packets went only to the recording's host, so its times
	// are the earliest they allow (the quickest crossing taken as
	// instant); each may have been later, by an amount nothing bounds.
	Earliest
	// Latest: packets went only from the recording's host, so its times
	// are the latest they allow; each may have been earlier, by an amount
	// nothing bounds.
	Latest
)

var placementNames = [...]string{Unplaced: "unplaced", Bounded: "bounded", Earliest: "earliest", Latest: "latest"}

// String names the placement as the JSON summary does (docs/events.md).
func (p Placement) String() string { return placementNames[p] }

// Placement says how the recording's clock was placed.
func (k ClockSkew) Placement() Placement {
	switch {
	case k.HasLower && k.HasUpper:
		return Bounded
	case k.HasUpper:
		return Earliest
	case k.HasLower:
		return Latest
	}
	return Unplaced
}

// Limits of the scan for packets seen on several hosts: clocks are
// aligned from the start of each recording, and a few thousand packets
// bound them as well as millions.
const (
	maxAlignEvents  = 1 << 20
	maxAlignPackets = 1 << 16
)

// sighting is when and how a packet was first and last seen by one
// recording, and where (its first maxStages devices and directions): a
// packet passes each once, so a second pass means the identity names
// several packets (a retransmission that kept its IP ID and sequence
// number), which bound nothing.
type sighting struct {
	first, last         uint64
	firstKind, lastKind event.Kind
	stages              [maxStages]uint64
	nstages             uint8
	ambiguous           bool
}

const maxStages = 8

// pass records that the packet passed a stage, and marks the sighting
// ambiguous when it had passed it before.
func (g *sighting) pass(stage uint64) {
	for _, s := range g.stages[:g.nstages] {
		if s == stage {
			g.ambiguous = true
			return
		}
	}
	if int(g.nstages) < maxStages {
		g.stages[g.nstages] = stage
		g.nstages++
	}
}

// alignClocks reads the start of each recording again, finds the packets
// seen by more than one (id names a packet the same on every host, false
// for an event that does not), and sets each recording's clock offset from
// the first recording's, which rebase takes off its times.
func (s *Stream) alignClocks(id func(*event.Event) (uint64, bool)) ([]ClockSkew, error) {
	seen := make([]recordingSightings, len(s.sources))
	for n, src := range s.sources {
		var err error
		if seen[n], err = sightings(src, id); err != nil {
			return nil, err
		}
	}
	skews := s.offsets(seen)
	s.skew = make([]int64, len(s.sources))
	for n, k := range skews {
		s.skew[n] = int64(k.Offset)
	}
	return skews, nil
}

// recordingSightings are one recording's sightings by packet, on its wall
// clock, which is off by up to anchorErr nanoseconds (Meta.AnchorErrNS).
type recordingSightings struct {
	packets   map[uint64]sighting
	anchorErr int64
}

// sightings reads a recording's first part anew, up to maxAlignEvents
// events, and keeps where each packet entering or leaving a device was
// first and last seen, on the recording's wall clock.
func sightings(src source, id func(*event.Event) (uint64, bool)) (recordingSightings, error) {
	r, err := Open(src[0].File)
	if err != nil {
		return recordingSightings{}, err
	}
	defer r.Close()
	seen := map[uint64]sighting{}
	var e event.Event
	for range maxAlignEvents {
		if err := r.Next(&e); err != nil {
			break // its end, or where it was cut off: it aligns by what it has
		}
		if e.Point != event.PointDev {
			continue
		}
		k, ok := id(&e)
		if !ok {
			continue
		}
		at := uint64(r.Meta.Wall(e.Time).UnixNano())
		g, known := seen[k]
		if !known {
			if len(seen) >= maxAlignPackets {
				continue
			}
			g = sighting{first: at, firstKind: e.Kind}
		}
		if at < g.first {
			g.first, g.firstKind = at, e.Kind
		}
		if at >= g.last {
			g.last, g.lastKind = at, e.Kind
		}
		g.pass(uint64(e.Netns)<<32 | uint64(e.Ifindex)<<8 | uint64(e.Kind))
		seen[k] = g
	}
	return recordingSightings{packets: seen, anchorErr: r.Meta.AnchorErrNS}, nil
}

// bounds are what packets seen by two recordings say of the second's
// clock minus the first's, on their wall clocks as converted (lo, hi),
// and how far the true offset may lie beyond them (slack: both
// recordings' anchor errors, since each converted its kernel's times to
// wall times with its own anchor).
type bounds struct {
	lo, hi  int64
	slack   int64
	packets int
}

// pairBounds bounds b's clock minus a's by the packets both saw.
func pairBounds(a, b recordingSightings) bounds {
	bd := bounds{lo: math.MinInt64, hi: math.MaxInt64, slack: a.anchorErr + b.anchorErr}
	for k, x := range a.packets {
		y, ok := b.packets[k]
		if !ok || x.ambiguous || y.ambiguous {
			continue
		}
		aToB := x.lastKind == event.KindDevTx && y.firstKind == event.KindDevRx
		bToA := y.lastKind == event.KindDevTx && x.firstKind == event.KindDevRx
		switch {
		case aToB && !bToA:
			bd.hi = min(bd.hi, int64(y.first-x.last))
		case bToA && !aToB:
			bd.lo = max(bd.lo, int64(y.last-x.first))
		default:
			continue // which way it went is not clear
		}
		bd.packets++
	}
	return bd
}

// skew is the offset bounds give, and the true offset's bounds, relative
// to base (the offset of the recording they were measured against). The
// offset is taken from the bounds as converted, not as widened: at a
// widened bound, the packet that set it would arrive before it left. At
// the one bound there is, the packet that set it takes crossingNS on the
// wire, so that it arrives after it left in the merged order too, which
// puts events of one time in the order of their recordings.
func (bd bounds) skew(host string, base time.Duration) ClockSkew {
	k := ClockSkew{Host: host, Packets: bd.packets, HasLower: bd.lo != math.MinInt64, HasUpper: bd.hi != math.MaxInt64}
	if k.HasLower {
		k.Lower = base + time.Duration(bd.lo-bd.slack)
	}
	if k.HasUpper {
		k.Upper = base + time.Duration(bd.hi+bd.slack)
	}
	switch k.Placement() {
	case Bounded:
		k.Offset = base + time.Duration(bd.lo+(bd.hi-bd.lo)/2)
	case Earliest:
		k.Offset = base + time.Duration(bd.hi-crossingNS)
	default:
		k.Offset = base + time.Duration(bd.lo+crossingNS)
	}
	return k
}

// crossingNS is the time on the wire given to the quickest packet when
// packets went one way only: the least there is.
const crossingNS = 1

// offsets places every recording against the first: through the
// recordings it shares the most packets with, first reached first.
func (s *Stream) offsets(seen []recordingSightings) []ClockSkew {
	skews := make([]ClockSkew, len(seen))
	for n := range skews {
		skews[n].Host = s.hostName(n)
	}
	placed := map[int]bool{0: true}
	for queue := []int{0}; len(queue) > 0; queue = queue[1:] {
		a := queue[0]
		for b := range seen {
			if placed[b] {
				continue
			}
			bd := pairBounds(seen[a], seen[b])
			if bd.packets == 0 {
				continue
			}
			skews[b] = bd.skew(skews[b].Host, skews[a].Offset)
			placed[b] = true
			queue = append(queue, b)
		}
	}
	return skews
}
