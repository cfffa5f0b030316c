package trace

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// A ruleset record is the namespace inode (u32le), the kernel time the
// ruleset was read (u64le), and iptables-save's text, deflated (rulesets
// of large clusters run to megabytes of very repetitive text).

// maxRulesetText bounds a ruleset's inflated text.
const maxRulesetText = 256 << 20

func encodeRuleset(s ruleset.Snapshot) ([]byte, error) {
	var b bytes.Buffer
	b.Write(binary.LittleEndian.AppendUint32(nil, s.Netns))
	b.Write(binary.LittleEndian.AppendUint64(nil, s.Time))
	zw, err := flate.NewWriter(&b, flate.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(zw, s.Text); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if b.Len() > maxRulesetRecord {
		return nil, fmt.Errorf("ruleset of namespace %d: %d bytes deflated, more than a recording holds", s.Netns, b.Len())
	}
	return b.Bytes(), nil
}

func decodeRuleset(p []byte) (ruleset.Snapshot, error) {
	if len(p) < 12 {
		return ruleset.Snapshot{}, errors.New("too short")
	}
	text, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(p[12:])), maxRulesetText+1))
	if err != nil {
		return ruleset.Snapshot{}, err
	}
	if len(text) > maxRulesetText {
		return ruleset.Snapshot{}, errors.New("text too long")
	}
	return ruleset.NewSnapshot(binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint64(p[4:]), string(text)), nil
}
