package event

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// RecordSize is the size of a narrow kernel record (struct nt_event4),
// which is also how recordings hold every event: an IPv4 event in as few
// bytes as before IPv6 existed, and old recordings read unchanged.
const RecordSize = 184

// Offsets within a narrow record; bpf/include/nettrace.h asserts them at
// compile time.
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
	offTuple   = 48
	offInner   = 64
	offCT      = 80
	offPayload = 136
	offSkbSeen = 176
	tupleSize  = 16
)

// ErrShortRecord reports a record smaller than RecordSize.
var ErrShortRecord = errors.New("event record too short")

var le = binary.LittleEndian

func addr4(b []byte) netip.Addr {
	return netip.AddrFrom4([4]byte{b[0], b[1], b[2], b[3]})
}

func decodeTuple(b []byte, t *Tuple) {
	t.Src = addr4(b[0:4])
	t.Dst = addr4(b[4:8])
	t.Sport = le.Uint16(b[8:])
	t.Dport = le.Uint16(b[10:])
	t.Proto = b[12]
	t.TCPFlags = b[13]
}

// Decode fills e from one recorded event or narrow kernel record without
// allocating. e.Packet then refers into b: it is valid only as long as b
// is.
func Decode(b []byte, e *Event) error {
	if len(b) < RecordSize {
		return ErrShortRecord
	}
	*e = Event{
		Time:    le.Uint64(b[offTime:]),
		Skb:     le.Uint64(b[offSkb:]),
		SkbSeen: le.Uint64(b[offSkbSeen:]),
		Netns:   le.Uint32(b[offNetns:]),
		Ifindex: le.Uint32(b[offIfindex:]),
		Point:   Point(b[offPoint]),
		Kind:    Kind(b[offKind]),
		Hook:    Hook(b[offHook]),
		Flags:   b[offFlags],
		CPU:     uint32(le.Uint16(b[offCPU:])),
	}
	ipv6 := e.Flags&FlagIPv6 != 0
	e.Flags &^= FlagIPv6
	copy(e.Ifname[:], b[offIfname:offIfname+16])
	decodeTuple(b[offTuple:], &e.Tuple)
	if e.Flags&FlagInner != 0 {
		decodeTuple(b[offInner:], &e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		ct := b[offCT:]
		e.CT.ID = le.Uint64(ct[0:])
		e.CT.Status = CTStatus(le.Uint32(ct[8:]))
		e.CT.Mark = le.Uint32(ct[12:])
		e.CT.Zone = le.Uint16(ct[16:])
		e.CT.Info = ct[18]
		decodeTuple(ct[24:], &e.CT.Orig)
		decodeTuple(ct[24+tupleSize:], &e.CT.Reply)
	}
	p := b[offPayload:offSkbSeen]
	switch e.Point {
	case PointNAT:
		if e.Flags&FlagPre != 0 {
			decodeTuple(p, &e.NAT.Pre)
		}
		e.NAT.OutIfindex = le.Uint32(p[16:])
		copy(e.NAT.OutIfname[:], p[24:40])
	case PointRoute:
		e.Route.Oif = le.Uint32(p[0:])
		e.Route.Gateway = addr4(p[4:8])
		e.Route.Src = addr4(p[8:12])
		e.Route.Err = int32(le.Uint32(p[12:]))
		e.Route.Table = le.Uint32(p[16:])
		copy(e.Route.OifName[:], p[24:40])
	case PointVXLAN:
		e.VXLAN.VNI = le.Uint32(p[0:])
		e.VXLAN.Remote = addr4(p[4:8])
		e.VXLAN.Local = addr4(p[8:12])
		e.VXLAN.Port = le.Uint16(p[12:])
	case PointSYN:
		e.SYN.Listener = netip.AddrPortFrom(addr4(p[0:4]), le.Uint16(p[4:]))
		e.SYN.Outcome = SYNOutcome(p[6])
		e.SYN.AcceptQueue = le.Uint32(p[8:])
		e.SYN.AcceptMax = le.Uint32(p[12:])
		e.SYN.SYNQueue = le.Uint32(p[16:])
		e.SYN.ListenOverfl = le.Uint64(p[24:])
		e.SYN.ListenDrops = le.Uint64(p[32:])
	case PointDrop:
		e.Drop.Location = le.Uint64(p[0:])
		e.Drop.Reason = le.Uint32(p[8:])
	case PointTCP:
		e.TCP.OldState = p[0]
		e.TCP.NewState = p[1]
		e.TCP.Cookie = le.Uint64(p[8:])
	}
	after := RecordSize
	if ipv6 {
		n, err := decodeIPv6Block(b[RecordSize:], e)
		if err != nil {
			return err
		}
		after += n
	}
	if n := int(le.Uint16(b[offCaplen:])); n > 0 && len(b) >= after+n {
		e.Packet = b[after : after+n]
	}
	return nil
}
