package output

import (
	"fmt"
	"strconv"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// synView shows the syn point: what a listener did with a SYN, and its queues.
type synView struct{}

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

func (synView) step(_ Names, _ *flow.Flow, e *event.Event) string {
	s := fmt.Sprintf("listener %s: %s", e.SYN.Listener, e.SYN.Outcome)
	if e.SYN.AcceptMax > 0 {
		s += fmt.Sprintf(" (accept queue %d/%d)", e.SYN.AcceptQueue, e.SYN.AcceptMax)
	}
	return s
}

func (synView) detail(_ Names, e *event.Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple), fmt.Sprintf("listener %s: %s", e.SYN.Listener, e.SYN.Outcome))
	if e.SYN.AcceptMax > 0 {
		detail = append(detail, fmt.Sprintf("(accept queue %d/%d, syn queue %d)", e.SYN.AcceptQueue, e.SYN.AcceptMax, e.SYN.SYNQueue))
	}
	if e.SYN.ListenDrops > 0 || e.SYN.ListenOverfl > 0 {
		detail = append(detail, fmt.Sprintf("ListenOverflows +%d ListenDrops +%d", e.SYN.ListenOverfl, e.SYN.ListenDrops))
	}
	return detail
}

func (synView) jsonKey() string { return "syn" }

func (synView) appendJSON(b []byte, _ Names, e *event.Event) []byte {
	var p jsonObject
	s := &e.SYN
	b = p.str(b, "listener", s.Listener.String())
	b = p.str(b, "outcome", s.Outcome.String())
	b = strconv.AppendBool(p.key(b, "dropped"), s.Outcome.Dropped())
	b = p.uint(b, "accept_queue", uint64(s.AcceptQueue))
	b = p.uint(b, "accept_max", uint64(s.AcceptMax))
	b = p.uint(b, "syn_queue", uint64(s.SYNQueue))
	b = p.uintOmit(b, "listen_drops", s.ListenDrops)
	b = p.uintOmit(b, "listen_overflows", s.ListenOverfl)
	return p.close(b)
}

func (synView) pcapng(_ Names, e *event.Event, c []string) []string {
	return append(c, "syn_outcome: "+e.SYN.Outcome.String())
}

func (synView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte { return b }
