package event

// PointTCP is the tcp point's value in enum nt_point, and its kinds'
// values are in enum nt_kind.
const (
	PointTCP Point = 7

	KindSynAckRetransmit Kind = 10 // a SYN-ACK retransmitted
	KindResetSent        Kind = 11 // a reset sent
	KindResetReceived    Kind = 12 // a reset received
	KindTCPState         Kind = 13 // a socket's state change
)

// TCP is the payload of a tcp event: a socket's state change, reset or
// SYN-ACK retransmit. The same in the narrow and the wide record.
type TCP struct {
	OldState uint8  `nt:"oldstate"`
	NewState uint8  `nt:"newstate"`
	Cookie   uint64 `nt:"cookie"` // the socket's cookie: unique for the life of the kernel
}

type tcpSection struct{}

func (tcpSection) name() string { return "tcp" }

func (tcpSection) journeyStep() bool { return false }

func (tcpSection) kinds() []kindName {
	return []kindName{{KindSynAckRetransmit, "synack-retransmit", DirectionNone}, {KindResetSent, "rst-sent", DirectionNone}, {KindResetReceived, "rst-received", DirectionNone}, {KindTCPState, "state", DirectionNone}}
}

func (tcpSection) sample(base Event) Event {
	base.Point, base.Kind, base.Packet = PointTCP, KindTCPState, nil
	base.TCP = TCP{OldState: 2, NewState: 7, Cookie: 0xffff8880}
	return base
}

// JSONTCP is a tcp event's payload.
type JSONTCP struct {
	OldState string `json:"old_state,omitempty"`
	NewState string `json:"new_state,omitempty"`
	Cookie   uint64 `json:"cookie,omitempty"`
}

func (tcpSection) Step(_ Lookup, _ TranslationHooks, e *Event) string {
	switch e.Kind {
	case KindTCPState:
		return TCPStateName(e.TCP.OldState) + " -> " + TCPStateName(e.TCP.NewState)
	case KindResetSent:
		return "reset sent"
	case KindResetReceived:
		return "reset received"
	case KindSynAckRetransmit:
		return "SYN-ACK retransmitted"
	}
	return e.Kind.String()
}

func (tcpSection) Detail(_ Lookup, e *Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple))
	if e.Kind == KindTCPState {
		detail = append(detail, TCPStateName(e.TCP.OldState)+" -> "+TCPStateName(e.TCP.NewState))
	}
	return detail
}

func (tcpSection) JSONKey() string { return "tcp" }

func (tcpSection) JSONSchema() any { return (*JSONTCP)(nil) }

func (tcpSection) AppendJSON(b []byte, _ Lookup, e *Event) []byte {
	var p JSONObject
	if e.Kind == KindTCPState {
		b = p.StrOmit(b, "old_state", TCPStateName(e.TCP.OldState))
		b = p.StrOmit(b, "new_state", TCPStateName(e.TCP.NewState))
	}
	b = p.UintOmit(b, "cookie", e.TCP.Cookie)
	return p.Close(b)
}

func (tcpSection) PCAPNG(_ Lookup, _ *Event, c []string) []string { return c }

func (tcpSection) AppendJSONFields(b []byte, _ *JSONObject, _ *Event) []byte { return b }
