package event

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
