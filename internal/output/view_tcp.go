package output

import (
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// tcpView shows the tcp point: a socket's state changes, resets and SYN-ACK retransmits.
type tcpView struct{}

// JSONTCP is a tcp event's payload.
type JSONTCP struct {
	OldState string `json:"old_state,omitempty"`
	NewState string `json:"new_state,omitempty"`
	Cookie   uint64 `json:"cookie,omitempty"`
}

func (tcpView) step(_ Names, _ *flow.Flow, e *event.Event) string {
	switch e.Kind {
	case event.KindTCPState:
		return event.TCPStateName(e.TCP.OldState) + " -> " + event.TCPStateName(e.TCP.NewState)
	case event.KindResetSent:
		return "reset sent"
	case event.KindResetReceived:
		return "reset received"
	case event.KindSynAckRetransmit:
		return "SYN-ACK retransmitted"
	}
	return e.Kind.String()
}

func (tcpView) detail(_ Names, e *event.Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple))
	if e.Kind == event.KindTCPState {
		detail = append(detail, event.TCPStateName(e.TCP.OldState)+" -> "+event.TCPStateName(e.TCP.NewState))
	}
	return detail
}

func (tcpView) jsonKey() string { return "tcp" }

func (tcpView) appendJSON(b []byte, _ Names, e *event.Event) []byte {
	var p jsonObject
	if e.Kind == event.KindTCPState {
		b = p.strOmit(b, "old_state", event.TCPStateName(e.TCP.OldState))
		b = p.strOmit(b, "new_state", event.TCPStateName(e.TCP.NewState))
	}
	b = p.uintOmit(b, "cookie", e.TCP.Cookie)
	return p.close(b)
}

func (tcpView) pcapng(_ Names, _ *event.Event, c []string) []string { return c }

func (tcpView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte { return b }
