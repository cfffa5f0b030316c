package event

import (
	"fmt"
	"net/netip"
	"strconv"
)

// PointSYN is the syn point's value in enum nt_point, and its kinds'
// values are in enum nt_kind.
const (
	PointSYN Point = 4

	KindSYN Kind = 6 // tcp_conn_request's outcome at a listener
)

// SYNOutcome is what a listener did with a SYN.
type SYNOutcome uint8

// SYN outcomes (enum nt_syn_outcome).
const (
	SYNQueued          SYNOutcome = 1
	SYNDropAcceptQueue SYNOutcome = 2
	SYNDropSYNQueue    SYNOutcome = 3
	SYNDropOther       SYNOutcome = 4
	SYNDropListenDrops SYNOutcome = 5 // seen in user space: ListenDrops moved, cause unknown
	SYNDropUnanswered  SYNOutcome = 6 // consumed by the listener without a SYN-ACK, queues unknown
	// SYNCookie: the SYN queue was full and a syncookie answered the SYN.
	// Not a drop: the connection is made when the client's ACK returns the
	// cookie (unless the accept queue is full by then).
	SYNCookie SYNOutcome = 7
	// SYNUnobserved: consumed by a listener in a namespace whose SYN-ACKs
	// were not seen yet (the tracepoint method, before the nat point's
	// programs were linked there): answered or dropped, nobody can say.
	// User space completes it from the listener's queues (synwatch).
	SYNUnobserved SYNOutcome = 8
)

var synOutcomeNames = map[SYNOutcome]string{
	SYNQueued: "queued", SYNDropAcceptQueue: "dropped: accept queue full",
	SYNDropSYNQueue: "dropped: SYN queue full", SYNDropOther: "dropped: no request created (PAWS, LSM or memory)",
	SYNDropListenDrops: "dropped by the listener (ListenDrops)",
	SYNDropUnanswered:  "dropped by the listener (no SYN-ACK)",
	SYNCookie:          "answered with a syncookie (SYN queue full)",
	SYNUnobserved:      "reached the listener, its answer not seen (the namespace was not watched yet)",
}

func (o SYNOutcome) String() string {
	if n, ok := synOutcomeNames[o]; ok {
		return n
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Dropped says whether the outcome is a drop.
func (o SYNOutcome) Dropped() bool {
	return o != SYNQueued && o != SYNCookie && o != SYNUnobserved && o != 0
}

// SYN is the payload of a syn event: what a listener did with a SYN, and
// its queues then.
type SYN struct {
	Listener     netip.AddrPort `nt:"laddr+lport"`
	Outcome      SYNOutcome     `nt:"outcome"`
	AcceptQueue  uint32         `nt:"accept_qlen"`
	AcceptMax    uint32         `nt:"accept_max"`
	SYNQueue     uint32         `nt:"syn_qlen"`
	ListenDrops  uint64         `nt:"listen_drops,varint"` // counter deltas in the listener's netns (user-space method)
	ListenOverfl uint64         `nt:"listen_overflows,varint"`
}

type synSection struct{}

func (synSection) name() string { return "syn" }

func (synSection) journeyStep() bool { return false }

func (synSection) kinds() []kindName { return []kindName{{KindSYN, "syn", DirectionNone}} }

func (synSection) sample(base Event) Event {
	base.Point, base.Kind = PointSYN, KindSYN
	base.SYN = SYN{Listener: netip.AddrPortFrom(base.Tuple.Dst, base.Tuple.Dport), Outcome: SYNDropAcceptQueue,
		AcceptQueue: 3, AcceptMax: 2, SYNQueue: 1, ListenDrops: 5, ListenOverfl: 4}
	return base
}

// JSONSYN is a syn event's payload.
type JSONSYN struct {
	Listener        string `json:"listener"`
	Outcome         string `json:"outcome"`
	Dropped         bool   `json:"dropped"`
	AcceptQueue     uint32 `json:"accept_queue"`
	AcceptMax       uint32 `json:"accept_max"`
	SYNQueue        uint32 `json:"syn_queue"`
	ListenDrops     uint64 `json:"listen_drops,omitempty"`
	ListenOverflows uint64 `json:"listen_overflows,omitempty"`
}

func (synSection) Step(_ Lookup, _ TranslationHooks, e *Event) string {
	s := fmt.Sprintf("listener %s: %s", e.SYN.Listener, e.SYN.Outcome)
	if e.SYN.AcceptMax > 0 {
		s += fmt.Sprintf(" (accept queue %d/%d)", e.SYN.AcceptQueue, e.SYN.AcceptMax)
	}
	return s
}

func (synSection) Detail(_ Lookup, e *Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple), fmt.Sprintf("listener %s: %s", e.SYN.Listener, e.SYN.Outcome))
	if e.SYN.AcceptMax > 0 {
		detail = append(detail, fmt.Sprintf("(accept queue %d/%d, syn queue %d)", e.SYN.AcceptQueue, e.SYN.AcceptMax, e.SYN.SYNQueue))
	}
	if e.SYN.ListenDrops > 0 || e.SYN.ListenOverfl > 0 {
		detail = append(detail, fmt.Sprintf("ListenOverflows +%d ListenDrops +%d", e.SYN.ListenOverfl, e.SYN.ListenDrops))
	}
	return detail
}

func (synSection) JSONKey() string { return "syn" }

func (synSection) JSONSchema() any { return (*JSONSYN)(nil) }

func (synSection) AppendJSON(b []byte, _ Lookup, e *Event) []byte {
	var p JSONObject
	s := &e.SYN
	b = p.Str(b, "listener", s.Listener.String())
	b = p.Str(b, "outcome", s.Outcome.String())
	b = strconv.AppendBool(p.Key(b, "dropped"), s.Outcome.Dropped())
	b = p.Uint(b, "accept_queue", uint64(s.AcceptQueue))
	b = p.Uint(b, "accept_max", uint64(s.AcceptMax))
	b = p.Uint(b, "syn_queue", uint64(s.SYNQueue))
	b = p.UintOmit(b, "listen_drops", s.ListenDrops)
	b = p.UintOmit(b, "listen_overflows", s.ListenOverfl)
	return p.Close(b)
}

func (synSection) PCAPNG(_ Lookup, e *Event, c []string) []string {
	return append(c, "syn_outcome: "+e.SYN.Outcome.String())
}

func (synSection) AppendJSONFields(b []byte, _ *JSONObject, _ *Event) []byte { return b }
