package event

// GateCounts are the kernel gate's counters (--healthy count): what became
// of the records of the TCP connections it held while they looked healthy.
// Records, not events: a record may carry a packet's several steps.
type GateCounts struct {
	// Held records were kept in the kernel; Released of them shipped when
	// their connection showed trouble.
	Held, Released uint64
	// Healthy connections ended normally while held; Discarded records
	// of them (held or made after their end) never reached user space.
	Healthy, Discarded uint64
	// Triggered connections showed trouble and shipped.
	Triggered uint64
	// Missing records a connection in trouble lacked: evicted, over its
	// bound, dropped after it ended, or lost on the way. User space counts
	// them as lost: the flows open meanwhile are incomplete.
	Missing uint64
	// EndedThenTrouble are the connections among Triggered that had ended
	// normally, their held records dropped then, and showed trouble
	// after: each counts one of Missing. Those are what the gate does by
	// design; the rest of Missing are losses.
	EndedThenTrouble uint64
	// Refused says why the gate asked for did not run (this kernel's
	// verifier refused it): every connection was recorded, the counts
	// are zero.
	Refused string
}
