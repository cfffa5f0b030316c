package trace

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// A ruleset record is the namespace inode (u32le), the kernel time the
// ruleset was read (u64le), then three texts deflated (rulesets of large
// clusters run to megabytes of very repetitive text), each but the last
// after its deflated length (u32le): iptables-save's, the native nftables
// tables, ip6tables-save's. Version 3 records hold the iptables-save text
// alone, after the time; versions 4 and 5 the first two.

func encodeRuleset(s ruleset.Snapshot) ([]byte, error) {
	var b bytes.Buffer
	b.Write(binary.LittleEndian.AppendUint32(nil, s.Netns))
	b.Write(binary.LittleEndian.AppendUint64(nil, s.Time))
	for _, text := range []string{s.Text, s.Native} {
		at := b.Len()
		b.Write(make([]byte, 4))
		if err := deflate(&b, text); err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint32(b.Bytes()[at:], uint32(b.Len()-at-4))
	}
	if err := deflate(&b, s.Text6); err != nil {
		return nil, err
	}
	if b.Len() > maxRulesetRecord {
		return nil, fmt.Errorf("ruleset of namespace %d: %d bytes deflated, more than a recording holds", s.Netns, b.Len())
	}
	return b.Bytes(), nil
}

func deflate(w io.Writer, text string) error {
	zw, err := flate.NewWriter(w, flate.DefaultCompression)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(zw, text); err != nil {
		return err
	}
	return zw.Close()
}

// inflate inflates a text of at most limit bytes: past it, errOverBudget
// (a few hundred bytes of a file can inflate to megabytes).
func inflate(p []byte, limit int64) (string, error) {
	text, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(p)), limit+1))
	if err != nil {
		return "", err
	}
	if int64(len(text)) > limit {
		return "", errOverBudget
	}
	return string(text), nil
}

// decodeRuleset decodes a ruleset record whose texts may inflate to at
// most limit bytes together.
func decodeRuleset(p []byte, version uint16, limit int64) (ruleset.Snapshot, error) {
	if len(p) < 12 {
		return ruleset.Snapshot{}, errors.New("too short")
	}
	netns, at := binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint64(p[4:])
	// The texts a record of this version holds, in order.
	texts := 3
	switch {
	case version < 4:
		texts = 1
	case version < 6:
		texts = 2
	}
	var out [3]string
	rest := p[12:]
	for i := range texts {
		section := rest
		if i < texts-1 {
			if len(rest) < 4 || uint64(binary.LittleEndian.Uint32(rest)) > uint64(len(rest)-4) {
				return ruleset.Snapshot{}, fmt.Errorf("ruleset text %d overruns the record", i+1)
			}
			n := 4 + int(binary.LittleEndian.Uint32(rest))
			section, rest = rest[4:n], rest[n:]
		}
		text, err := inflate(section, limit)
		if err != nil {
			return ruleset.Snapshot{}, err
		}
		limit -= int64(len(text))
		out[i] = text
	}
	return ruleset.NewSnapshot(netns, at, out[0], out[2], out[1]), nil
}

// A rule trace record is one step of nftables tracing (ruleset.Trace):
// namespace (u32le), time (u64le), trace id (u32le), kind, protocol (u8),
// ports (u16le), mark value and known bits (u32le), handle (u64le),
// position (u32le), then the addresses (16 bytes each, IPv4 mapped) and
// hook, table, chain and verdict as uvarint-length strings.

const ruleTraceFixed = 4 + 8 + 4 + 1 + 1 + 2 + 2 + 4 + 4 + 8 + 4 + 16 + 16

func encodeRuleTrace(t *ruleset.Trace) []byte {
	p := make([]byte, 0, ruleTraceFixed+len(t.Hook)+len(t.Table)+len(t.Chain)+len(t.Verdict)+4)
	p = binary.LittleEndian.AppendUint32(p, t.Netns)
	p = binary.LittleEndian.AppendUint64(p, t.Time)
	p = binary.LittleEndian.AppendUint32(p, t.ID)
	p = append(p, byte(t.Kind), t.Packet.Proto)
	p = binary.LittleEndian.AppendUint16(p, t.Packet.Sport)
	p = binary.LittleEndian.AppendUint16(p, t.Packet.Dport)
	p = binary.LittleEndian.AppendUint32(p, t.Packet.Mark.Value)
	p = binary.LittleEndian.AppendUint32(p, t.Packet.Mark.Known)
	p = binary.LittleEndian.AppendUint64(p, t.Handle)
	p = binary.LittleEndian.AppendUint32(p, uint32(t.Position))
	src, dst := t.Packet.Src.As16(), t.Packet.Dst.As16()
	p = append(append(p, src[:]...), dst[:]...)
	for _, s := range []string{t.Hook, t.Table, t.Chain, t.Verdict} {
		p = binary.AppendUvarint(p, uint64(len(s)))
		p = append(p, s...)
	}
	return p
}

func decodeRuleTrace(p []byte) (ruleset.Trace, error) {
	if len(p) < ruleTraceFixed {
		return ruleset.Trace{}, errors.New("too short")
	}
	le := binary.LittleEndian
	t := ruleset.Trace{Netns: le.Uint32(p), Time: le.Uint64(p[4:]), ID: le.Uint32(p[12:]), Kind: ruleset.TraceKind(p[16])}
	t.Packet.Proto, t.Packet.Sport, t.Packet.Dport = p[17], le.Uint16(p[18:]), le.Uint16(p[20:])
	t.Packet.Mark = ruleset.Mark{Value: le.Uint32(p[22:]), Known: le.Uint32(p[26:])}
	t.Handle, t.Position = le.Uint64(p[30:]), int(le.Uint32(p[38:]))
	t.Packet.Src = netip.AddrFrom16([16]byte(p[42:58])).Unmap()
	t.Packet.Dst = netip.AddrFrom16([16]byte(p[58:74])).Unmap()
	p = p[ruleTraceFixed:]
	for _, s := range []*string{&t.Hook, &t.Table, &t.Chain, &t.Verdict} {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return ruleset.Trace{}, errors.New("string overruns the record")
		}
		*s, p = string(p[k:k+int(n)]), p[k+int(n):]
	}
	return t, nil
}
