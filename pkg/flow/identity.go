package flow

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// The identities a flow is known by. The kernel recycles the address of an
// skb, a conntrack entry or a socket as soon as the object dies, so no key
// is a bare address: a packet is its skb address and the time that address
// was first seen holding it (and an epoch, for frees the kernel did not
// report); a conntrack entry is its address, its original tuple and zone; a
// socket is its cookie, which is never reused; a tuple belongs to a network
// namespace.

type keyKind uint32

const (
	keySkb keyKind = iota + 1
	keyCT
	keyTuple
	keySock
	keyWire
	keySYN
)

// key identifies something a flow is known by. It holds no pointer, so the
// maps keyed by it cost the garbage collector nothing to scan, and no
// padding (kind and proto are 32 bits wide), so a map hashes and compares
// it as one run of memory rather than field by field.
type key struct {
	id    uint64 // skb or conntrack address, socket cookie
	aux   uint64 // skb: first-seen time; conntrack: its original tuple and zone
	a, b  uint64 // tuple endpoints (endpoint)
	netns uint32
	epoch uint32
	kind  keyKind
	proto uint32
}

// endpoint is an address and port in one word: an IPv4 address << 16 |
// port; an IPv6 address folded to 47 bits, above the port, with the top bit
// set (two IPv6 endpoints collide with odds of 2^-47).
func endpoint(a netip.Addr, port uint16) uint64 {
	switch {
	case a.Is4():
		v := a.As4()
		return uint64(v[0])<<40 | uint64(v[1])<<32 | uint64(v[2])<<24 | uint64(v[3])<<16 | uint64(port)
	case a.Is6():
		v := a.As16()
		h := key{id: binary.BigEndian.Uint64(v[:8]), aux: binary.BigEndian.Uint64(v[8:])}.sum()
		return 1<<63 | (h>>17)<<16 | uint64(port)
	}
	return uint64(port) // a tuple the kernel left empty
}

// ICMP echo types: a request and its reply share the echo id (Dport) but
// not the type (Sport).
const (
	icmpEchoReply    = 0
	icmpEchoRequest  = 8
	icmp6EchoRequest = 128
	icmp6EchoReply   = 129
)

// echo says whether a tuple is an ICMP or ICMPv6 echo request or reply.
func echo(t event.Tuple) bool {
	typ := t.Sport >> 8
	return (t.Proto == event.ProtoICMP && (typ == icmpEchoRequest || typ == icmpEchoReply)) ||
		(t.Proto == event.ProtoICMPv6 && (typ == icmp6EchoRequest || typ == icmp6EchoReply))
}

// wireKey is one packet as two hosts see it on the wire between them:
// its tuple at the event, and its fingerprint (IP ID, TCP sequence,
// acknowledgement and flags), which NAT and encapsulation leave alone. No
// namespace: the two hosts' namespaces are their own. Zero when the event
// carries no bytes of the packet.
func wireKey(e *event.Event) key {
	fp := fingerprint(e)
	if fp == 0 {
		return key{}
	}
	t := e.Tuple
	if e.HasInner() {
		t = e.Inner
	}
	return key{kind: keyWire, id: fp, proto: uint32(t.Proto), a: endpoint(t.Src, t.Sport), b: endpoint(t.Dst, t.Dport)}
}

// WireID names the packet an event is about the same on every host that
// sees it on the wire (wireKey); false when the event carries no bytes of
// it. Replay aligns several hosts' clocks by it.
func WireID(e *event.Event) (uint64, bool) {
	k := wireKey(e)
	return k.sum(), k.kind != 0
}

// tupleKey is a connection's tuple in one namespace, both directions alike.
func tupleKey(netns uint32, t event.Tuple) key {
	if echo(t) {
		t.Sport = t.Dport
	}
	a, b := endpoint(t.Src, t.Sport), endpoint(t.Dst, t.Dport)
	if b < a {
		a, b = b, a
	}
	return key{kind: keyTuple, netns: netns, proto: uint32(t.Proto), a: a, b: b}
}

// ctKey is a conntrack entry: its address while it holds this original
// tuple in this zone. An entry freed and reallocated for another
// connection gets another key.
func ctKey(ct *event.Conntrack) key {
	o := ct.Orig
	return key{kind: keyCT, id: ct.ID, aux: uint64(ct.Zone)<<32 | uint64(o.Sport)<<16 | uint64(o.Dport),
		a: endpoint(o.Src, uint16(o.Proto)), b: endpoint(o.Dst, 0)}
}

// skbID is a packet's kernel identity: its address and when the kernel
// first saw that address holding it (zero in old recordings).
type skbID struct {
	addr, seen uint64
}

// skbState tells which packet an event of an skb identity is about when
// the kernel did not see the last one freed (a free the drop point does not
// see, or a recording without identities): the packet seen last at the identity, and what tells the
// one before it. A CPU holds the last steps of a packet (its pending
// journey) while another CPU, given the recycled address, reports the next
// packet's: they come after the next packet's first steps, and must
// neither join it nor end it.
type skbState struct {
	cur  skbEpoch
	prev packetSigns
}

// packetSigns tell one packet at an skb identity from another: its epoch,
// its fingerprint, and the tuples it has had in its direction (NAT and
// encapsulation add to them).
type packetSigns struct {
	tuples [6]uint64 // sums of the path tuples (key.sum): only ever compared
	fp     uint64
	epoch  uint32
	n      uint8
}

// skbEpoch is the packet seen last at an skb identity: its signs, the
// stages it passed, when it was first and last seen, and whether a drop
// was reported.
type skbEpoch struct {
	packetSigns
	first, last uint64
	freed       bool
	stages      [24]stage
	ns          uint8
}

// packetMarks are what an event says about the packet it is about, to
// tell it among the packets seen at its skb identity.
type packetMarks struct {
	tuple   uint64 // its path tuple's sum (before any translation)
	post    uint64 // a NAT event's translated path tuple's sum
	hasPost bool
	fp      uint64 // its fingerprint; zero without packet bytes
	stage   stage
}

// had says whether the packet had the marks' tuple, or its translation.
func (s *packetSigns) had(m *packetMarks) bool {
	return s.knows(m.tuple) || (m.hasPost && s.knows(m.post))
}

// owns says whether an event made before this packet's next one (a step a
// CPU held) is about this packet: by fingerprint when both have one, by
// tuple otherwise.
func (s *packetSigns) owns(m *packetMarks) bool {
	if m.fp != 0 && s.fp != 0 {
		return m.fp == s.fp
	}
	return s.had(m)
}

// sameBytes says whether an event carries this packet's fingerprint, both
// known: the IP id with a TCP segment's numbers do not recur at one skb
// identity within a connection's life.
func (s *packetSigns) sameBytes(m *packetMarks) bool {
	return m.fp != 0 && m.fp == s.fp
}

// pathTuple is a packet's tuple as a key, in its direction: a packet
// never turns into its reply.
func pathTuple(t event.Tuple) key {
	return key{kind: keyTuple, proto: uint32(t.Proto), a: endpoint(t.Src, t.Sport), b: endpoint(t.Dst, t.Dport)}
}

// fingerprint is what stays the same in one packet from end to end and
// differs between two packets of a connection: the IPv4 identification
// (IPv6 has none: its payload length, in the same bytes) and, for TCP, the flags, sequence and acknowledgement numbers (NAT rewrites
// addresses, ports and checksums only). It reads the inner packet of an
// encapsulated one; zero when the event carries no packet bytes.
func fingerprint(e *event.Event) uint64 {
	pkt := connBytes(e)
	hl, proto, ok := event.TransportHeader(pkt)
	if !ok {
		return 0
	}
	fp := uint64(binary.BigEndian.Uint16(pkt[4:]))<<48 | 1
	if proto == event.ProtoTCP && len(pkt) >= hl+14 {
		seq := binary.BigEndian.Uint32(pkt[hl+4:])
		ack := binary.BigEndian.Uint32(pkt[hl+8:])
		fp ^= (uint64(seq)<<16 | uint64(pkt[hl+13])) ^ uint64(ack)<<24
	}
	return fp
}

// stage is a place a packet passes once: a point, kind and hook in a
// namespace and device, for the packet or (inner) its tunnel's packet. A
// packet seen at a stage it already passed is a new packet at a recycled
// address. Held as a key's sum (stages are only ever compared): a packet
// identity keeps many.
type stage uint64

func stageOf(e *event.Event) stage {
	code := uint64(e.Point)<<16 | uint64(e.Kind)<<8 | uint64(e.Hook)<<1
	if e.HasInner() {
		code |= 1
	}
	return stage(key{id: code, netns: e.Netns, epoch: e.Ifindex}.sum())
}

// pass records a stage; false when the packet already passed it. Past
// the stages it can hold (a packet crossing many namespaces) it cannot
// tell, and says true.
func (s *skbEpoch) pass(st stage) bool {
	for i := range s.ns {
		if s.stages[i] == st {
			return false
		}
	}
	if int(s.ns) == len(s.stages) {
		return true
	}
	s.stages[s.ns] = st
	s.ns++
	return true
}

// knows says whether the packet had a path tuple, by its sum.
func (s *packetSigns) knows(sum uint64) bool {
	for i := range s.n {
		if s.tuples[i] == sum {
			return true
		}
	}
	return false
}

// learn records a path tuple of the packet, by its sum.
func (s *packetSigns) learn(sum uint64) {
	if s.knows(sum) {
		return
	}
	if int(s.n) < len(s.tuples) {
		s.tuples[s.n] = sum
		s.n++
		return
	}
	copy(s.tuples[:], s.tuples[1:])
	s.tuples[len(s.tuples)-1] = sum
}

// skbGap is how long an skb may be silent and still be the same packet;
// packets cross a host in microseconds.
const skbGap = uint64(time.Second)

// connFacts are what one event says about the connection it belongs to
// that a packet of another connection would contradict.
type connFacts struct {
	isn    uint32 // initial sequence number of a SYN (dir 0) or SYN-ACK (dir 1)
	isnDir int8   // -1: none
	// acked is what a SYN-ACK acknowledges less one: the client's initial
	// sequence number, past the data of a Fast Open SYN. A SYN-ACK answers
	// one SYN, and a late one must not join the next connection on the same
	// tuple.
	acked    uint32
	hasAcked bool
	// seq and ack are a segment's numbers (not a SYN's; ack when it has
	// ACK set), whichever way it went: a segment of an earlier connection
	// on the same tuple is numbered before this one's initial numbers.
	seq, ack       uint32
	hasSeq, hasAck bool
	ctKey          key // the conntrack entry's key, when it identifies the connection
	ct             ctSeen
	sock           sockSeen
	// sockDone: the socket closed after its connection was established
	// (not a connect that failed, whose replies may still be on their way).
	sockDone bool
}

// ctSeen and sockSeen hold keys by their sums: a flow keeps several, and
// only ever compares them.
type ctSeen struct {
	netns uint32
	sum   uint64 // of the entry's key
}

type sockSeen struct {
	netns  uint32
	conn   uint64 // sum of the socket's tuple: one socket holds it at a time
	cookie uint64
}

// sum folds a key into 64 bits (equal keys, equal sums; unequal keys
// collide with odds of 2^-64).
func (k key) sum() uint64 {
	h := uint64(14695981039346656037)
	for _, v := range [...]uint64{k.id, k.aux, k.a, k.b, uint64(k.netns)<<32 | uint64(k.epoch), uint64(k.kind)<<8 | uint64(k.proto)} {
		h ^= v
		h *= 1099511628211
		h ^= h >> 29
	}
	return h
}

// connState is what makes a flow one connection: at most one initial
// sequence number per direction, one conntrack entry per namespace and
// one socket per tuple and namespace.
type connState struct {
	isn    [2]uint32
	hasISN [2]bool
	cts    [4]ctSeen
	nct    uint8
	socks  [2]sockSeen
	nsock  uint8
	// done has bit i set when socks[i] closed after its connection was
	// established; untracked, when the flow saw more sockets than it holds.
	done      uint8
	untracked bool
}

// maxSYNData bounds the data a Fast Open SYN carries, which its SYN-ACK
// acknowledges too: at most a segment.
const maxSYNData = 1<<16 - 1

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpACK = 0x10
)

// factsOf reads the connection facts of an event.
func factsOf(e *event.Event, pt event.Tuple) connFacts {
	f := connFacts{isnDir: -1}
	if pt.Proto == event.ProtoTCP && e.Point != event.PointTCP {
		if seq, ack, ok := event.TCPSeqAck(connBytes(e)); ok {
			switch {
			case pt.TCPFlags&tcpSYN == 0:
				f.seq, f.hasSeq = seq, true
				f.ack, f.hasAck = ack, pt.TCPFlags&tcpACK != 0
			case pt.TCPFlags&tcpACK != 0:
				f.isn, f.isnDir = seq, 1
				f.acked, f.hasAcked = ack-1, true
			default:
				f.isn, f.isnDir = seq, 0
			}
		}
	}
	if e.HasCT() && !e.HasInner() && e.CT.Identifies() && !e.ToGroup() {
		f.ctKey = ctKey(&e.CT)
		f.ct = ctSeen{netns: e.Netns, sum: f.ctKey.sum()}
	}
	if e.Point == event.PointTCP && e.TCP.Cookie != 0 && e.Kind == event.KindTCPState {
		f.sock = sockSeen{netns: e.Netns, conn: tupleKey(e.Netns, e.Tuple).sum(), cookie: e.TCP.Cookie}
		f.sockDone = e.TCP.NewState == tcpClose && e.TCP.OldState != tcpSynSent && e.TCP.OldState != tcpSynRecv
	}
	return f
}

// agrees says whether an event with facts f can belong to the flow's
// connection.
func (s *connState) agrees(f *connFacts) bool {
	if f.isnDir >= 0 && s.hasISN[f.isnDir] && s.isn[f.isnDir] != f.isn {
		return false
	}
	if f.hasAcked && s.hasISN[0] && f.acked-s.isn[0] > maxSYNData {
		return false
	}
	if f.hasSeq && !s.numbers(f, 0) && !s.numbers(f, 1) {
		return false
	}
	if f.ct.sum != 0 && !s.sameSYN(f) && !s.sameNumbers(f) {
		for _, c := range s.cts[:s.nct] {
			if c.netns == f.ct.netns && c.sum != f.ct.sum {
				return false
			}
		}
	}
	if f.sock.cookie != 0 {
		for _, k := range s.socks[:s.nsock] {
			if k.netns == f.sock.netns && k.conn == f.sock.conn && k.cookie != f.sock.cookie {
				return false
			}
		}
	}
	return true
}

// numbers says whether a segment's numbers can be this connection's, sent
// in direction dir (0: the SYN's sender's): none before the initial
// numbers known of either side.
func (s *connState) numbers(f *connFacts, dir int) bool {
	if s.hasISN[dir] && before(f.seq, s.isn[dir]+1) {
		return false
	}
	return !(f.hasAck && s.hasISN[1-dir] && before(f.ack, s.isn[1-dir]+1))
}

// sameNumbers says whether a segment is numbered as this connection's
// first segments are, both ways (the initial numbers of both sides known):
// its own, whatever entry it has, as a retransmitted SYN is (sameSYN). A
// segment of a connection whose entry was replaced (conntrack re-creates
// it from a segment after the one it had was killed) carries a new one.
func (s *connState) sameNumbers(f *connFacts) bool {
	if !f.hasSeq || !f.hasAck || !s.hasISN[0] || !s.hasISN[1] {
		return false
	}
	for dir := range 2 {
		if f.seq-(s.isn[dir]+1) <= maxSYNData && f.ack-(s.isn[1-dir]+1) <= maxSYNData {
			return true
		}
	}
	return false
}

// maxBefore is how far before a connection's first number a segment's
// number must be to be another connection's. Linux numbers a connection
// on a tuple after the one before it (RFC 6528: a clock plus a hash of
// the tuple), so its predecessor's late segments come before; a
// connection's own numbers come before its first only after 3 GiB sent
// (the space wraps at 4), where it may be split.
const maxBefore = 1 << 30

// before says whether sequence number n comes before first, by at most
// maxBefore.
func before(n, first uint32) bool {
	d := first - n
	return d > 0 && d <= maxBefore
}

// compatible says whether two flows can be one connection.
func (s *connState) compatible(o *connState) bool {
	for d := range s.isn {
		if s.hasISN[d] && o.hasISN[d] && s.isn[d] != o.isn[d] {
			return false
		}
	}
	for _, c := range o.cts[:o.nct] {
		if !s.agrees(&connFacts{isnDir: -1, ct: c}) {
			return false
		}
	}
	for _, k := range o.socks[:o.nsock] {
		if !s.agrees(&connFacts{isnDir: -1, sock: k}) {
			return false
		}
	}
	return true
}

// add records facts the flow now holds.
func (s *connState) add(f *connFacts) {
	if f.isnDir >= 0 && !s.hasISN[f.isnDir] {
		s.isn[f.isnDir], s.hasISN[f.isnDir] = f.isn, true
	}
	if f.hasAcked && !s.hasISN[0] {
		s.isn[0], s.hasISN[0] = f.acked, true
	}
	if f.ct.sum != 0 && !s.hasCT(f.ct) {
		s.addCT(f)
	}
	if f.sock.cookie == 0 {
		return
	}
	i := s.sockIndex(f.sock)
	if i < 0 && s.nsock < uint8(len(s.socks)) {
		i = int(s.nsock)
		s.socks[i] = f.sock
		s.nsock++
	}
	switch {
	case i < 0:
		s.untracked = true
	case f.sockDone:
		s.done |= 1 << i
	}
}

// over says whether every socket of the connection closed after it was
// established: what is left of it is segments in flight.
func (s *connState) over() bool {
	return s.nsock > 0 && !s.untracked && s.done == 1<<s.nsock-1
}

// addCT adds the conntrack entry of an event; a retransmitted SYN's
// replaces the entry the flow had in its namespace: conntrack re-creates
// the entry of a connection it saw closed (a reset answering the first
// SYN's challenge ACK) when the SYN comes again, and the connection is the
// new entry's from then on.
func (s *connState) addCT(f *connFacts) {
	if s.sameSYN(f) || s.sameNumbers(f) {
		for i := range s.cts[:s.nct] {
			if s.cts[i].netns == f.ct.netns {
				s.cts[i] = f.ct
				return
			}
		}
	}
	if s.nct < uint8(len(s.cts)) {
		s.cts[s.nct] = f.ct
		s.nct++
	}
}

// sameSYN says whether the event is a SYN (or SYN-ACK) with the flow's own
// initial sequence number: a retransmit of the flow's, whatever entry
// conntrack gives it.
func (s *connState) sameSYN(f *connFacts) bool {
	return f.isnDir >= 0 && s.hasISN[f.isnDir] && s.isn[f.isnDir] == f.isn
}

func (s *connState) hasCT(c ctSeen) bool {
	for _, x := range s.cts[:s.nct] {
		if x == c {
			return true
		}
	}
	return false
}

func (s *connState) sockIndex(k sockSeen) int {
	for i, x := range s.socks[:s.nsock] {
		if x == k {
			return i
		}
	}
	return -1
}

// merge adds another flow's facts.
func (s *connState) merge(o *connState) {
	for d := range o.isn {
		if o.hasISN[d] {
			s.add(&connFacts{isnDir: int8(d), isn: o.isn[d]})
		}
	}
	for _, c := range o.cts[:o.nct] {
		s.add(&connFacts{isnDir: -1, ct: c})
	}
	for i, k := range o.socks[:o.nsock] {
		s.add(&connFacts{isnDir: -1, sock: k, sockDone: o.done&(1<<i) != 0})
	}
	s.untracked = s.untracked || o.untracked
}

// ipAddrs returns the addresses of a packet prefix's IP header.
func ipAddrs(b []byte) (src, dst netip.Addr, ok bool) {
	switch {
	case len(b) >= 40 && b[0]>>4 == 6:
		return netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40])), true
	case len(b) >= 20 && b[0]>>4 == 4:
		return netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20])), true
	}
	return netip.Addr{}, netip.Addr{}, false
}

// carries says whether an IP header holds a tuple's addresses.
func carries(b []byte, t event.Tuple) bool {
	src, dst, ok := ipAddrs(b)
	return ok && src == t.Src && dst == t.Dst
}

// connBytes returns the bytes of the packet an event's connection tuple
// is about: the packet itself, or the one inside its encapsulation. Where
// a point snapshots an encapsulated packet matters: the tunnel function
// runs before the outer headers exist, the device after. Bytes that hold
// neither tuple are not trusted.
func connBytes(e *event.Event) []byte {
	if !e.HasInner() {
		if carries(e.Packet, e.Tuple) {
			return e.Packet
		}
		return nil
	}
	if carries(e.Packet, e.Inner) {
		return e.Packet
	}
	if in := event.VXLANInner(e.Packet); carries(in, e.Inner) {
		return in
	}
	return nil
}

// ICMP and ICMPv6 error types that quote the packet they are about.
const (
	icmpUnreachable   = 3
	icmpTimeExceeded  = 11
	icmpParamProblem  = 12
	icmp6Unreachable  = 1
	icmp6PacketTooBig = 2
	icmp6TimeExceeded = 3
	icmp6ParamProblem = 4
	icmpErrorQuoteOff = 8 // the quoted IP header follows the ICMP header
)

// quotes says whether an ICMP or ICMPv6 message (its type in the tuple's
// source port) is an error quoting a packet.
func quotes(t event.Tuple) bool {
	switch t.Proto {
	case event.ProtoICMP:
		switch t.Sport >> 8 {
		case icmpUnreachable, icmpTimeExceeded, icmpParamProblem:
			return true
		}
	case event.ProtoICMPv6:
		switch t.Sport >> 8 {
		case icmp6Unreachable, icmp6PacketTooBig, icmp6TimeExceeded, icmp6ParamProblem:
			return true
		}
	}
	return false
}

// quotedTuple returns the tuple of the packet an ICMP error is about, from
// the header it quotes.
func quotedTuple(e *event.Event) (event.Tuple, bool) {
	t := e.Tuple
	if e.HasInner() {
		t = e.Inner
	}
	if !quotes(t) {
		return event.Tuple{}, false
	}
	pkt := connBytes(e)
	hl, _, ok := event.TransportHeader(pkt)
	if !ok || len(pkt) < hl+icmpErrorQuoteOff {
		return event.Tuple{}, false
	}
	q := pkt[hl+icmpErrorQuoteOff:]
	qhl, proto, ok := event.TransportHeader(q)
	src, dst, _ := ipAddrs(q)
	if !ok {
		return event.Tuple{}, false
	}
	qt := event.Tuple{Src: src, Dst: dst, Proto: proto}
	if (proto == event.ProtoTCP || proto == event.ProtoUDP) && len(q) >= qhl+4 {
		qt.Sport = binary.BigEndian.Uint16(q[qhl:])
		qt.Dport = binary.BigEndian.Uint16(q[qhl+2:])
	}
	return qt, true
}
