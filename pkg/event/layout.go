package event

import "net/netip"

// layout is where one record form keeps each field: the narrow form
// (IPv4 addresses in one word: recordings, and the kernel's IPv4 events)
// and the wide one (four words per address). The header (time to device
// name) and the drop and tcp payloads are the same in both.
type layout struct {
	size, tuple, inner, ct, payload, skbSeen int
	tupleSize, addrSize                      int
	ctTuples                                 int // within the conntrack section
	natOutIfindex, natOutIfname              int
	routeOif, routeErr, routeGateway         int
	routeSrc, routeTable, routeOifname       int
	vxlanVNI, vxlanRemote, vxlanLocal        int
	vxlanPort                                int
	synAddr, synPort, synOutcome             int
	synAcceptQueue, synAcceptMax, synQueue   int
	synOverflows, synDrops                   int
}

var narrow = layout{size: RecordSize, tuple: 48, inner: 64, ct: 80, payload: 136, skbSeen: 176,
	tupleSize: 16, addrSize: 4, ctTuples: 24,
	natOutIfindex: 16, natOutIfname: 24,
	routeOif: 0, routeGateway: 4, routeSrc: 8, routeErr: 12, routeTable: 16, routeOifname: 24,
	vxlanVNI: 0, vxlanRemote: 4, vxlanLocal: 8, vxlanPort: 12,
	synAddr: 0, synPort: 4, synOutcome: 6, synAcceptQueue: 8, synAcceptMax: 12, synQueue: 16, synOverflows: 24, synDrops: 32}

var wide = layout{size: WideRecordSize, tuple: 48, inner: 88, ct: 128, payload: 232, skbSeen: 296,
	tupleSize: 40, addrSize: 16, ctTuples: 24,
	natOutIfindex: 40, natOutIfname: 48,
	routeOif: 0, routeErr: 4, routeGateway: 8, routeSrc: 24, routeTable: 40, routeOifname: 48,
	vxlanVNI: 0, vxlanRemote: 4, vxlanLocal: 20, vxlanPort: 36,
	synAddr: 0, synPort: 16, synOutcome: 18, synAcceptQueue: 20, synAcceptMax: 24, synQueue: 28, synOverflows: 40, synDrops: 48}

// addr reads an address; a wide one is IPv6 when its tuple says so.
func (l *layout) addr(b []byte, ipv6 bool) netip.Addr {
	if ipv6 {
		return netip.AddrFrom16([16]byte(b[:16]))
	}
	return netip.AddrFrom4([4]byte(b[:4]))
}

// tupleOf reads a tuple and says whether its addresses are IPv6 (a wide
// tuple's family byte follows its flags).
func (l *layout) tupleOf(b []byte, t *Tuple) bool {
	a := 2 * l.addrSize
	ipv6 := l.addrSize == 16 && b[a+6] != 0
	t.Src = l.addr(b[0:], ipv6)
	t.Dst = l.addr(b[l.addrSize:], ipv6)
	t.Sport = le.Uint16(b[a:])
	t.Dport = le.Uint16(b[a+2:])
	t.Proto = b[a+4]
	t.TCPFlags = b[a+5]
	return ipv6
}

// decode fills e from a record of this layout, its packet bytes following
// at packetAt; b holds at least l.size bytes.
func (l *layout) decode(b []byte, e *Event, packetAt int) {
	*e = Event{
		Time:    le.Uint64(b[offTime:]),
		Skb:     le.Uint64(b[offSkb:]),
		SkbSeen: le.Uint64(b[l.skbSeen:]),
		Netns:   le.Uint32(b[offNetns:]),
		Ifindex: le.Uint32(b[offIfindex:]),
		Point:   Point(b[offPoint]),
		Kind:    Kind(b[offKind]),
		Hook:    Hook(b[offHook]),
		Flags:   b[offFlags] &^ (flagWide | FlagIPv6),
		CPU:     uint32(le.Uint16(b[offCPU:])),
	}
	if n := int(le.Uint16(b[offCaplen:])); n > 0 && len(b) >= packetAt+n {
		e.Packet = b[packetAt : packetAt+n]
	}
	copy(e.Ifname[:], b[offIfname:offIfname+16])
	ipv6 := l.tupleOf(b[l.tuple:], &e.Tuple)
	if e.Flags&FlagInner != 0 {
		l.tupleOf(b[l.inner:], &e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		ct := b[l.ct:]
		e.CT.ID = le.Uint64(ct[0:])
		e.CT.Status = CTStatus(le.Uint32(ct[8:]))
		e.CT.Mark = le.Uint32(ct[12:])
		e.CT.Zone = le.Uint16(ct[16:])
		e.CT.Info = ct[18]
		l.tupleOf(ct[l.ctTuples:], &e.CT.Orig)
		l.tupleOf(ct[l.ctTuples+l.tupleSize:], &e.CT.Reply)
	}
	// The payload's addresses have the family of the event's tuple.
	p := b[l.payload:l.skbSeen]
	switch e.Point {
	case PointNAT:
		if e.Flags&FlagPre != 0 {
			l.tupleOf(p, &e.NAT.Pre)
		}
		e.NAT.OutIfindex = le.Uint32(p[l.natOutIfindex:])
		copy(e.NAT.OutIfname[:], p[l.natOutIfname:l.natOutIfname+16])
	case PointRoute:
		e.Route.Oif = le.Uint32(p[l.routeOif:])
		e.Route.Err = int32(le.Uint32(p[l.routeErr:]))
		e.Route.Gateway = l.addr(p[l.routeGateway:], ipv6)
		e.Route.Src = l.addr(p[l.routeSrc:], ipv6)
		e.Route.Table = le.Uint32(p[l.routeTable:])
		copy(e.Route.OifName[:], p[l.routeOifname:l.routeOifname+16])
	case PointVXLAN:
		e.VXLAN.VNI = le.Uint32(p[l.vxlanVNI:])
		e.VXLAN.Remote = l.addr(p[l.vxlanRemote:], ipv6)
		e.VXLAN.Local = l.addr(p[l.vxlanLocal:], ipv6)
		e.VXLAN.Port = le.Uint16(p[l.vxlanPort:])
	case PointSYN:
		e.SYN.Listener = netip.AddrPortFrom(l.addr(p[l.synAddr:], ipv6), le.Uint16(p[l.synPort:]))
		e.SYN.Outcome = SYNOutcome(p[l.synOutcome])
		e.SYN.AcceptQueue = le.Uint32(p[l.synAcceptQueue:])
		e.SYN.AcceptMax = le.Uint32(p[l.synAcceptMax:])
		e.SYN.SYNQueue = le.Uint32(p[l.synQueue:])
		e.SYN.ListenOverfl = le.Uint64(p[l.synOverflows:])
		e.SYN.ListenDrops = le.Uint64(p[l.synDrops:])
	case PointDrop:
		e.Drop.Location = le.Uint64(p[0:])
		e.Drop.Reason = le.Uint32(p[8:])
	case PointTCP:
		e.TCP.OldState = p[0]
		e.TCP.NewState = p[1]
		e.TCP.Cookie = le.Uint64(p[8:])
	}
}
