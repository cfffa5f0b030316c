package event

import "net/netip"

// Encode writes e as a recorded event (RecordSize bytes, its IPv6
// addresses if it has any, then the packet bytes) into dst, which must
// hold RecordSize+MaxIPv6Block+len(e.Packet) bytes, and returns the bytes
// written. Recordings store events this way, so that events synthesized in
// user space and kernel records replay alike.
func Encode(e *Event, dst []byte) int {
	b := dst[:RecordSize]
	clear(b)
	block, ipv6 := appendIPv6Block(dst[RecordSize:RecordSize], e)
	le.PutUint64(b[offTs:], e.Time)
	le.PutUint64(b[offSkb:], e.Skb)
	le.PutUint64(b[narrow.skbSeen:], e.SkbSeen)
	le.PutUint32(b[offNetns:], e.Netns)
	le.PutUint32(b[offIfindex:], e.Ifindex)
	b[offPoint], b[offKind], b[offHook], b[offFlags] = byte(e.Point), byte(e.Kind), byte(e.Hook), e.Flags
	if ipv6 {
		b[offFlags] |= FlagIPv6
	}
	le.PutUint16(b[offCPU:], uint16(e.CPU))
	le.PutUint16(b[offCaplen:], uint16(len(e.Packet)))
	copy(b[offIfname:offIfname+16], e.Ifname[:])
	encodeTuple(b[narrow.tuple:], &e.Tuple)
	if e.Flags&FlagInner != 0 {
		encodeTuple(b[narrow.inner:], &e.Inner)
	}
	if e.Flags&FlagCT != 0 {
		ct, o := b[narrow.ct:], conntrackAt[formNarrow]
		le.PutUint64(ct[o.id:], e.CT.ID)
		le.PutUint32(ct[o.status:], uint32(e.CT.Status))
		le.PutUint32(ct[o.mark:], e.CT.Mark)
		le.PutUint16(ct[o.zone:], e.CT.Zone)
		ct[o.ctinfo] = e.CT.Info
		encodeTuple(ct[o.orig:], &e.CT.Orig)
		encodeTuple(ct[o.reply:], &e.CT.Reply)
	}
	p := b[narrow.payload:narrow.skbSeen]
	encodeSection(e, p)
	n := RecordSize + len(block)
	return n + copy(dst[n:], e.Packet)
}

// encodeTuple writes a tuple of a narrow record.
func encodeTuple(b []byte, t *Tuple) {
	o := tupleAt[formNarrow]
	putAddr4(b[o.saddr:o.saddr+4], t.Src)
	putAddr4(b[o.daddr:o.daddr+4], t.Dst)
	le.PutUint16(b[o.sport:], t.Sport)
	le.PutUint16(b[o.dport:], t.Dport)
	b[o.proto], b[o.tcpFlags] = t.Proto, t.TCPFlags
}

func putAddr4(b []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(b, v[:])
	}
}
