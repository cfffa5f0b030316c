package event

import (
	"encoding/binary"
	"errors"
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
