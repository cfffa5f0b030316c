package event

import (
	"encoding/binary"
	"errors"
)

// RecordSize is the size of a narrow kernel record (struct nt_event4),
// which is also how recordings hold every event: an IPv4 event in as few
// bytes as before IPv6 existed, and old recordings read unchanged.
const RecordSize = 184

// Offsets of the header, the same in both record forms (layout.go);
// bpf/include/nettrace.h asserts the narrow form's at compile time.
const (
	offTime    = 0
	offSkb     = 8
	offNetns   = 16
	offIfindex = 20
	offPoint   = 24
	offKind    = 25
	offHook    = 26
	offFlags   = 27
	offCPU     = 28
	offCaplen  = 30
	offIfname  = 32
)

// ErrShortRecord reports a record smaller than RecordSize.
var ErrShortRecord = errors.New("event record too short")

var le = binary.LittleEndian

// Decode fills e from one recorded event or narrow kernel record without
// allocating. e.Packet then refers into b: it is valid only as long as b
// is.
func Decode(b []byte, e *Event) error {
	if len(b) < RecordSize {
		return ErrShortRecord
	}
	if b[offFlags]&FlagIPv6 == 0 {
		narrow.decode(b, e, RecordSize)
		return nil
	}
	// The IPv6 addresses follow the fixed part, then the packet.
	n, err := ipv6BlockLen(b[RecordSize:])
	if err != nil {
		return err
	}
	narrow.decode(b, e, RecordSize+n)
	decodeIPv6Block(b[RecordSize:], e)
	return nil
}
