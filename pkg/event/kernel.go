package event

// WideRecordSize is the size of a wide kernel record (sizeof(struct
// nt_event)): addresses four words wide, for an event with an IPv6
// address. The kernel sends an event without one narrowed to the record
// Decode reads (struct nt_event4, RecordSize bytes), so an IPv4 event costs
// the ring buffer and user space no more than before IPv6 existed.
const WideRecordSize = 304

// flagWide marks a wide kernel record (NT_F_WIDE).
const flagWide = 0x40

// DecodeKernel fills e from one kernel record, narrow or wide, without
// allocating. e.Packet then refers into b: it is valid only as long as b
// is.
func DecodeKernel(b []byte, e *Event) error {
	if len(b) <= offFlags || b[offFlags]&flagWide == 0 {
		return Decode(b, e)
	}
	if len(b) < WideRecordSize {
		return ErrShortRecord
	}
	wide.decode(b, e, WideRecordSize)
	return nil
}
