package explain

// Trigger is what makes the kernel gate (--healthy count,
// bpf/include/gate.h) ship an IPv4 TCP connection it held while it looked
// healthy: under the gate a rule's evidence reaches it only through one of
// these. Each rule states its triggers (Rule.Triggers), and the rules'
// tables check that every flow a rule fires on shows one of them.
type Trigger uint8

const (
	// Ungated: the rule's connections are not IPv4 TCP, which the gate
	// never holds (UDP, ICMP, IPv6): they ship as without it.
	Ungated Trigger = iota + 1
	// TriggerDrop: a drop the drop point judges evidence of failure (any
	// but a TCP socket's ordinary drop of a segment without SYN).
	TriggerDrop
	// TriggerListener: a listener refused a SYN (its queues, or no
	// request made).
	TriggerListener
	// TriggerReset: a reset refusing a connection, or one before its
	// handshake completed.
	TriggerReset
	// TriggerSYNACKAgain: a listener sent its SYN-ACK again.
	TriggerSYNACKAgain
	// TriggerConnectGivenUp: a socket left SYN_SENT for CLOSE.
	TriggerConnectGivenUp
	// TriggerInvalid: conntrack judged a packet INVALID.
	TriggerInvalid
	// TriggerSYNAgain: a SYN sent again before any answer.
	TriggerSYNAgain
)

func (t Trigger) String() string {
	names := [...]string{"", "ungated", "drop", "listener refusal", "reset", "SYN-ACK sent again", "connect given up", "INVALID", "SYN sent again"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return "trigger(?)"
}
