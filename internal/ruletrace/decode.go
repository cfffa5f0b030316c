package ruletrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// step is one trace message (NFT_MSG_TRACE) as the kernel sent it.
type step struct {
	id           uint32
	kind         ruleset.TraceKind
	table, chain string
	handle       uint64
	verdict      string
	nfproto      uint32
	packet       ruleset.Packet
	hasPacket    bool
}

// traceType is the netlink message type of trace messages.
const traceType = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_TRACE

// decodeStep reads a trace message's payload: struct nfgenmsg, then
// attributes (enum nft_trace_attributes).
func decodeStep(data []byte) (step, error) {
	if len(data) < 4 {
		return step{}, errors.New("trace message too short")
	}
	s := step{nfproto: uint32(data[0])}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return step{}, err
	}
	ad.ByteOrder = binary.BigEndian
	var network, transport []byte
	var policy uint32
	var hasPolicy bool
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_TRACE_TABLE:
			s.table = ad.String()
		case unix.NFTA_TRACE_CHAIN:
			s.chain = ad.String()
		case unix.NFTA_TRACE_RULE_HANDLE:
			s.handle = ad.Uint64()
		case unix.NFTA_TRACE_TYPE:
			s.kind = ruleset.TraceKind(ad.Uint32())
		case unix.NFTA_TRACE_ID:
			s.id = ad.Uint32()
		case unix.NFTA_TRACE_NFPROTO:
			s.nfproto = ad.Uint32()
		case unix.NFTA_TRACE_POLICY:
			policy, hasPolicy = ad.Uint32(), true
		case unix.NFTA_TRACE_NETWORK_HEADER:
			network = ad.Bytes()
		case unix.NFTA_TRACE_TRANSPORT_HEADER:
			transport = ad.Bytes()
		case unix.NFTA_TRACE_VERDICT:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				var code uint32
				var chain string
				for nad.Next() {
					switch nad.Type() {
					case unix.NFTA_VERDICT_CODE:
						code = nad.Uint32()
					case unix.NFTA_VERDICT_CHAIN:
						chain = nad.String()
					}
				}
				s.verdict = verdictName(code, chain)
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return step{}, fmt.Errorf("trace message: %w", err)
	}
	if s.kind == ruleset.TracePolicy && hasPolicy {
		s.verdict = verdictName(policy, "")
	}
	if s.kind == ruleset.TraceReturn && s.handle != 0 {
		// A RETURN rule: 6.1 reports it as the chain's
		// return, with the rule's handle; 6.18 as a rule.
		s.kind, s.verdict = ruleset.TraceRule, "return"
	}
	s.packet, s.hasPacket = packetOf(network, transport)
	return s, nil
}

// Netfilter verdicts (include/uapi/linux/netfilter.h), which x/sys/unix
// does not define; the low byte is the verdict, the rest its argument (a
// queue number).
const (
	nfDrop        = 0
	nfAccept      = 1
	nfStolen      = 2
	nfQueue       = 3
	nfRepeat      = 4
	nfVerdictMask = 0xff
)

// verdictName names a verdict code (NF_* and NFT_* verdicts) as nft does.
func verdictName(code uint32, chain string) string {
	switch int32(code) {
	case unix.NFT_CONTINUE:
		return "continue"
	case unix.NFT_BREAK:
		return "break"
	case unix.NFT_JUMP:
		return "jump " + chain
	case unix.NFT_GOTO:
		return "goto " + chain
	case unix.NFT_RETURN:
		return "return"
	}
	switch code & nfVerdictMask {
	case nfDrop:
		return "drop"
	case nfAccept:
		return "accept"
	case nfStolen:
		return "stolen"
	case nfQueue:
		return "queue"
	case nfRepeat:
		return "repeat"
	}
	return fmt.Sprintf("verdict %d", int32(code))
}

// packetOf reads a packet's tuple from the headers a trace message
// carries, as nettrace's events give it (ICMP: type<<8|code, echo id).
func packetOf(network, transport []byte) (ruleset.Packet, bool) {
	var p ruleset.Packet
	switch {
	case len(network) >= 20 && network[0]>>4 == 4:
		p = ruleset.Packet{
			Proto: network[9],
			Src:   netip.AddrFrom4([4]byte(network[12:16])),
			Dst:   netip.AddrFrom4([4]byte(network[16:20])),
		}
	case len(network) >= 40 && network[0]>>4 == 6:
		p = ruleset.Packet{
			Proto: ip6Transport(network),
			Src:   netip.AddrFrom16([16]byte(network[8:24])),
			Dst:   netip.AddrFrom16([16]byte(network[24:40])),
		}
	default:
		return ruleset.Packet{}, false
	}
	switch p.Proto {
	case event.ProtoTCP, event.ProtoUDP:
		if len(transport) >= 4 {
			p.Sport, p.Dport = binary.BigEndian.Uint16(transport), binary.BigEndian.Uint16(transport[2:])
		}
	case event.ProtoICMP, event.ProtoICMPv6:
		if len(transport) >= 6 {
			p.Sport, p.Dport = binary.BigEndian.Uint16(transport), binary.BigEndian.Uint16(transport[4:])
		}
	}
	return p, true
}

// ip6Transport is the transport protocol of an IPv6 packet whose network
// header the kernel sent whole: up to the transport header, extension
// headers included (the trace's network header ends where nf_tables found
// the transport one).
func ip6Transport(network []byte) uint8 {
	next, off := network[6], 40
	for off+8 <= len(network) {
		switch next {
		case unix.IPPROTO_HOPOPTS, unix.IPPROTO_ROUTING, unix.IPPROTO_DSTOPTS:
			next, off = network[off], off+8*(int(network[off+1])+1)
		case unix.IPPROTO_FRAGMENT:
			next, off = network[off], off+8
		case unix.IPPROTO_AH:
			next, off = network[off], off+4*(int(network[off+1])+2)
		default:
			return next
		}
	}
	return next
}
