package ruletrace

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/filter"
)

// tablePrefix begins the name of every table a nettrace adds.
const tablePrefix = "nettrace-"

// TableName is the nftables table this nettrace adds to each namespace:
// its own, named for its process, as two nettraces may trace at once (the
// DaemonSet's recorder and an engineer's watch) and a name is one table's.
var TableName = tablePrefix + strconv.Itoa(os.Getpid())

// nettraceTable says whether a table is one a nettrace added, this one or
// another: its steps trace the tracer, not the rules.
func nettraceTable(name string) bool { return strings.HasPrefix(name, tablePrefix) }

// maxAlternatives bounds the rules a filter becomes (one per alternative
// of its normal form, in each chain).
const maxAlternatives = 32

// Tracing costs the kernel a netlink message per rule a traced packet
// matches: selected packets beyond this rate (per chain and alternative)
// go untraced, and their rules are attributed from the ruleset instead.
const (
	tracedPerSecond = 5000
	tracedBurst     = 1000
)

// tableOwned is NFT_TABLE_F_OWNER (kernel 5.12), which x/sys/unix does not
// define: the table lives as long as the socket that added it.
const tableOwned = 0x2

// firstPriority is the lowest hook priority there is (NF_IP_PRI_FIRST, as
// the two's complement the kernel reads): nettrace's chains run before
// every other, conntrack's and raw's included.
const firstPriority = 1 << 31

// entryHooks are where a packet starts its way through a namespace:
// received (PREROUTING) or sent from it (OUTPUT). The mark set there stays
// on the packet through INPUT, FORWARD and POSTROUTING; the kernel clears
// it when the packet leaves the namespace.
var entryHooks = []struct {
	chain string
	hook  uint32
}{{"prerouting", unix.NF_INET_PRE_ROUTING}, {"output", unix.NF_INET_LOCAL_OUT}}

// family is an nftables family nettrace adds its table in: ip for
// iptables' rules, ip6 for ip6tables'.
type family struct {
	proto uint8 // NFPROTO_IPV4, NFPROTO_IPV6
	name  string
	// Where the addresses are in the network header, and their length.
	saddr, daddr, addrLen uint32
}

var families = []family{
	{unix.NFPROTO_IPV4, "ip", 12, 16, 4},
	{unix.NFPROTO_IPV6, "ip6", 8, 24, 16},
}

func (f family) ipv6() bool { return f.proto == unix.NFPROTO_IPV6 }

// tableBatch is the batch that adds nettrace's table in one family.
type tableBatch struct {
	family   family
	messages []netlink.Message
}

// tableMessages are the batches that add nettrace's table in each family
// where prog can select a packet: owned by the socket that sends it (the
// kernel removes it when that socket closes, also when nettrace is
// killed), with a chain ahead of every other at each entry hook whose
// rules set nftrace on the packets prog selects.
func tableMessages(prog *filter.Program) ([]tableBatch, error) {
	alts, err := prog.Alternatives(maxAlternatives)
	if err != nil {
		return nil, err
	}
	var out []tableBatch
	for _, f := range families {
		msgs, err := familyTable(prog, f, alts)
		if err != nil {
			return nil, err
		}
		if msgs != nil {
			out = append(out, tableBatch{f, msgs})
		}
	}
	return out, nil
}

// familyTable is the batch of one family's table; nil when prog selects
// no packet of the family.
func familyTable(prog *filter.Program, f family, alts [][]filter.Term) ([]netlink.Message, error) {
	var rules [][]expr.Any
	for _, alt := range alts {
		matches, err := alternativeExprs(f, alt)
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			rules = append(rules, append(m,
				&expr.Limit{Type: expr.LimitTypePkts, Rate: tracedPerSecond, Unit: expr.LimitTimeSecond, Burst: tracedBurst},
				&expr.Immediate{Register: 1, Data: []byte{1}},
				&expr.Meta{Key: expr.MetaKeyNFTRACE, SourceRegister: true, Register: 1}))
		}
	}
	if len(rules) > maxAlternatives {
		return nil, fmt.Errorf("filter %q needs %d nftables rules in the %s family, more than %d", prog.Expr, len(rules), f.name, maxAlternatives)
	}
	if len(rules) == 0 {
		return nil, nil
	}
	msgs := []netlink.Message{
		batchMessage(unix.NFNL_MSG_BATCH_BEGIN),
		nftMessage(f, unix.NFT_MSG_NEWTABLE, netlink.Create, []netlink.Attribute{
			{Type: unix.NFTA_TABLE_NAME, Data: cstring(TableName)},
			{Type: unix.NFTA_TABLE_FLAGS, Data: be32(tableOwned)},
		}),
	}
	for _, h := range entryHooks {
		hook, err := netlink.MarshalAttributes([]netlink.Attribute{
			{Type: unix.NFTA_HOOK_HOOKNUM, Data: be32(h.hook)},
			{Type: unix.NFTA_HOOK_PRIORITY, Data: be32(firstPriority)},
		})
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, nftMessage(f, unix.NFT_MSG_NEWCHAIN, netlink.Create, []netlink.Attribute{
			{Type: unix.NFTA_CHAIN_TABLE, Data: cstring(TableName)},
			{Type: unix.NFTA_CHAIN_NAME, Data: cstring(h.chain)},
			{Type: unix.NLA_F_NESTED | unix.NFTA_CHAIN_HOOK, Data: hook},
			{Type: unix.NFTA_CHAIN_TYPE, Data: cstring("filter")},
		}))
		for _, r := range rules {
			m, err := ruleMessage(f, h.chain, r)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		}
	}
	return append(msgs, batchMessage(unix.NFNL_MSG_BATCH_END)), nil
}

func ruleMessage(f family, chain string, exprs []expr.Any) (netlink.Message, error) {
	elems := make([]netlink.Attribute, len(exprs))
	for i, e := range exprs {
		data, err := expr.Marshal(f.proto, e)
		if err != nil {
			return netlink.Message{}, fmt.Errorf("nftables expression %T: %w", e, err)
		}
		elems[i] = netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: data}
	}
	list, err := netlink.MarshalAttributes(elems)
	if err != nil {
		return netlink.Message{}, err
	}
	return nftMessage(f, unix.NFT_MSG_NEWRULE, netlink.Create|unix.NLM_F_APPEND, []netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: cstring(TableName)},
		{Type: unix.NFTA_RULE_CHAIN, Data: cstring(chain)},
		{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: list},
	}), nil
}

// nftMessage is an nf_tables request of family f; attributes that fail to
// encode (none of ours can) leave it empty, and the kernel refuses it.
func nftMessage(f family, typ uint16, flags netlink.HeaderFlags, attrs []netlink.Attribute) netlink.Message {
	data, _ := netlink.MarshalAttributes(attrs)
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ), Flags: netlink.Request | netlink.Acknowledge | flags},
		Data:   append(genHeader(f.proto, 0), data...),
	}
}

// batchMessage begins or ends a transaction: the table appears whole or
// not at all.
func batchMessage(typ uint16) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request},
		Data:   genHeader(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES),
	}
}

// genHeader is struct nfgenmsg.
func genHeader(family uint8, resID uint16) []byte {
	return binary.BigEndian.AppendUint16([]byte{family, unix.NFNETLINK_V0}, resID)
}

func cstring(s string) []byte { return append([]byte(s), 0) }

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// Transport header offsets the expressions load from.
const (
	offSport = 0 // in the TCP or UDP header
	offDport = 2
)

// alternativeExprs turns one alternative of a filter into nftables rules
// of family f: nftables has no "or" inside a rule, so a term that is one
// (a host on either side, a port of TCP or UDP) multiplies the rules.
func alternativeExprs(f family, alt []filter.Term) ([][]expr.Any, error) {
	out := [][]expr.Any{{}}
	for _, t := range alt {
		if t.Op == filter.OpHost && t.Net.Addr().Is6() != f.ipv6() {
			// A family's table sees its own packets only: there a host of
			// the other family never matches, and its negation always does.
			if !t.Not {
				return nil, nil
			}
			continue
		}
		if t.Op == filter.OpHost && t.Net.Bits() == 0 {
			// ip or ip6 in its own family's table: every packet there.
			if t.Not {
				return nil, nil
			}
			continue
		}
		choices, err := termExprs(f, t)
		if err != nil {
			return nil, err
		}
		var next [][]expr.Any
		for _, prefix := range out {
			for _, c := range choices {
				next = append(next, append(append([]expr.Any{}, prefix...), c...))
			}
		}
		out = next
	}
	return out, nil
}

// termExprs is a term as alternatives of expression lists of family f.
func termExprs(f family, t filter.Term) ([][]expr.Any, error) {
	switch t.Op {
	case filter.OpProto:
		return [][]expr.Any{l4proto(t.Proto, !t.Not)}, nil
	case filter.OpHost:
		src, dst := addrExprs(f, f.saddr, t), addrExprs(f, f.daddr, t)
		switch {
		case t.Dir == filter.DirSrc:
			return [][]expr.Any{src}, nil
		case t.Dir == filter.DirDst:
			return [][]expr.Any{dst}, nil
		case t.Not: // neither side
			return [][]expr.Any{append(src, dst...)}, nil
		}
		return [][]expr.Any{src, dst}, nil
	case filter.OpPort:
		var out [][]expr.Any
		if t.Not { // not TCP nor UDP: no port to match
			out = append(out, append(l4proto(event.ProtoTCP, false), l4proto(event.ProtoUDP, false)...))
		}
		for _, proto := range []uint8{event.ProtoTCP, event.ProtoUDP} {
			src, dst := portExprs(offSport, t), portExprs(offDport, t)
			switch {
			case t.Dir == filter.DirSrc:
				out = append(out, append(l4proto(proto, true), src...))
			case t.Dir == filter.DirDst:
				out = append(out, append(l4proto(proto, true), dst...))
			case t.Not:
				out = append(out, append(append(l4proto(proto, true), src...), dst...))
			default:
				out = append(out, append(l4proto(proto, true), src...), append(l4proto(proto, true), dst...))
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("filter instruction %d has no nftables form", t.Op)
}

func cmpOp(match bool) expr.CmpOp {
	if match {
		return expr.CmpOpEq
	}
	return expr.CmpOpNeq
}

func l4proto(proto uint8, match bool) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: cmpOp(match), Register: 1, Data: []byte{proto}},
	}
}

func addrExprs(f family, offset uint32, t filter.Term) []expr.Any {
	// The words the BPF side loads, written back as they were read, are
	// the network's bytes.
	a, m, _ := t.Words()
	var addr, mask []byte
	for i := range f.addrLen / 4 {
		addr = binary.LittleEndian.AppendUint32(addr, a[i])
		mask = binary.LittleEndian.AppendUint32(mask, m[i])
	}
	out := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: f.addrLen}}
	if t.Net.Bits() != int(f.addrLen*8) {
		out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: f.addrLen, Mask: mask, Xor: make([]byte, f.addrLen)})
	}
	return append(out, &expr.Cmp{Op: cmpOp(!t.Not), Register: 1, Data: addr})
}

func portExprs(offset uint32, t filter.Term) []expr.Any {
	load := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: offset, Len: 2}
	lo, hi := binary.BigEndian.AppendUint16(nil, t.Port), binary.BigEndian.AppendUint16(nil, t.PortEnd)
	if t.Port == t.PortEnd {
		return []expr.Any{load, &expr.Cmp{Op: cmpOp(!t.Not), Register: 1, Data: lo}}
	}
	return []expr.Any{load, &expr.Range{Op: cmpOp(!t.Not), Register: 1, FromData: lo, ToData: hi}}
}
