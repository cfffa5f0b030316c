package event

import "net/netip"

// WideRecordSize is the size of a wide kernel record (sizeof(struct
// nt_event)): addresses four words wide, for an event with an IPv6
// address. The kernel sends an event without one narrowed to the record
// Decode reads (struct nt_event4, RecordSize bytes), so an IPv4 event costs
// the ring buffer and user space no more than before IPv6 existed.
const WideRecordSize = 304

// flagWide marks a wide kernel record (NT_F_WIDE).
const flagWide = 0x40

// Offsets within a wide record; a test in internal/probe checks them
// against the layout bpf2go generated from the C header.
const (
	kOffTuple   = 48
	kOffInner   = 88
	kOffCT      = 128
	kOffPayload = 232
	kOffSkbSeen = 296
	kTupleSize  = 40
	kCTTuples   = 24 // the entry's tuples within struct nt_conntrack
)

// kernelAddr reads an address of the record's family from its four words.
func kernelAddr(b []byte, ipv6 bool) netip.Addr {
	if ipv6 {
		return netip.AddrFrom16([16]byte(b[:16]))
	}
	return addr4(b)
}

// decodeKernelTuple reads a wide tuple and says whether its addresses are
// IPv6.
func decodeKernelTuple(b []byte, t *Tuple) bool {
	ipv6 := b[38] != 0
	t.Src = kernelAddr(b[0:16], ipv6)
	t.Dst = kernelAddr(b[16:32], ipv6)
	t.Sport = le.Uint16(b[32:])
	t.Dport = le.Uint16(b[34:])
	t.Proto = b[36]
	t.TCPFlags = b[37]
	return ipv6
}

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
	*e = Event{
		Time:    le.Uint64(b[offTime:]),
		Skb:     le.Uint64(b[offSkb:]),
		SkbSeen: le.Uint64(b[kOffSkbSeen:]),
		Netns:   le.Uint32(b[offNetns:]),
		Ifindex: le.Uint32(b[offIfindex:]),
		Point:   Point(b[offPoint]),
		Kind:    Kind(b[offKind]),
		Hook:    Hook(b[offHook]),
		Flags:   b[offFlags] &^ flagWide,
		CPU:     uint32(le.Uint16(b[offCPU:])),
	}
	if n := int(le.Uint16(b[offCaplen:])); n > 0 && len(b) >= WideRecordSize+n {
		e.Packet = b[WideRecordSize : WideRecordSize+n]
	}
	copy(e.Ifname[:], b[offIfname:offIfname+16])
	ipv6 := decodeKernelTuple(b[kOffTuple:], &e.Tuple)
	if e.Flags&FlagInner != 0 {
		decodeKernelTuple(b[kOffInner:], &e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		ct := b[kOffCT:]
		e.CT.ID = le.Uint64(ct[0:])
		e.CT.Status = CTStatus(le.Uint32(ct[8:]))
		e.CT.Mark = le.Uint32(ct[12:])
		e.CT.Zone = le.Uint16(ct[16:])
		e.CT.Info = ct[18]
		decodeKernelTuple(ct[kCTTuples:], &e.CT.Orig)
		decodeKernelTuple(ct[kCTTuples+kTupleSize:], &e.CT.Reply)
	}
	// The payload's addresses have the family of the event's tuple.
	p := b[kOffPayload:kOffSkbSeen]
	switch e.Point {
	case PointNAT:
		if e.Flags&FlagPre != 0 {
			decodeKernelTuple(p, &e.NAT.Pre)
		}
		e.NAT.OutIfindex = le.Uint32(p[40:])
		copy(e.NAT.OutIfname[:], p[48:64])
	case PointRoute:
		e.Route.Oif = le.Uint32(p[0:])
		e.Route.Err = int32(le.Uint32(p[4:]))
		e.Route.Gateway = kernelAddr(p[8:24], ipv6)
		e.Route.Src = kernelAddr(p[24:40], ipv6)
		e.Route.Table = le.Uint32(p[40:])
		copy(e.Route.OifName[:], p[48:64])
	case PointVXLAN:
		e.VXLAN.VNI = le.Uint32(p[0:])
		e.VXLAN.Remote = kernelAddr(p[4:20], ipv6)
		e.VXLAN.Local = kernelAddr(p[20:36], ipv6)
		e.VXLAN.Port = le.Uint16(p[36:])
	case PointSYN:
		e.SYN.Listener = netip.AddrPortFrom(kernelAddr(p[0:16], ipv6), le.Uint16(p[16:]))
		e.SYN.Outcome = SYNOutcome(p[18])
		e.SYN.AcceptQueue = le.Uint32(p[20:])
		e.SYN.AcceptMax = le.Uint32(p[24:])
		e.SYN.SYNQueue = le.Uint32(p[28:])
		e.SYN.ListenOverfl = le.Uint64(p[40:])
		e.SYN.ListenDrops = le.Uint64(p[48:])
	case PointDrop:
		e.Drop.Location = le.Uint64(p[0:])
		e.Drop.Reason = le.Uint32(p[8:])
	case PointTCP:
		e.TCP.OldState = p[0]
		e.TCP.NewState = p[1]
		e.TCP.Cookie = le.Uint64(p[8:])
	}
	return nil
}
