package trace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math/bits"
	"net/netip"
	"os"
	"slices"
	"sync"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// Reader reads a recording.
type Reader struct {
	File    string
	Meta    Meta
	Summary *Summary // set once the closing summary is read
	// Rulesets are the namespaces' rulesets read so far.
	Rulesets ruleset.History
	// RuleTraces are the steps of nftables tracing read so far.
	RuleTraces ruleset.Traces
	// OnLoss, when set, is told of each loss record as it is read.
	OnLoss func(win event.LossWindow, through uint64)
	// OnTick, when set, is told of each tick as it is read: after the
	// event before it, before the next.
	OnTick func(at uint64)

	br     *bufio.Reader
	closer io.Closer
	off    int64
	// names guards netns, symbols, pods, nodes and services: they grow (the
	// address books are replaced) as records are read, and are looked up
	// by whatever explains and shows the events meanwhile.
	names       sync.RWMutex
	netns       map[uint32]string
	symbols     map[uint64]string
	pods, nodes addressBook
	services    serviceBook
	payload     []byte
	rec         []byte
	records     uint64
	version     uint16
	// held is what the recording's records made the reader keep (ruleset
	// texts inflated, names, pods, rule traces), within MaxHeld.
	held int64
}

// MaxHeld is the budget of what one recording may make a reader keep in
// memory: its rulesets' texts as inflated, namespace and symbol names,
// pod addresses, Service frontends as inflated and rule traces, in bytes. A record that would pass it
// ends the recording there, an *Error that names it: a file of 771 kB
// whose four rulesets inflate to 63 MiB each took 5.7 GB to replay, and
// takes 1.3 GB within the budget (a parsed ruleset takes about 20 times
// its text; docs/performance.md). kube-proxy's rulesets for thousands of
// Services are a few megabytes.
const MaxHeld = 64 << 20

// errOverBudget is a record that would pass MaxHeld.
var errOverBudget = fmt.Errorf("it would pass the %d MiB a recording may make nettrace hold (rulesets, names, pods, rule traces): a recording this large is not read further; the events before it were", MaxHeld>>20)

// hold counts n bytes kept for a record, or refuses them past MaxHeld.
func (r *Reader) hold(n int) error {
	if r.held+int64(n) > MaxHeld {
		return errOverBudget
	}
	r.held += int64(n)
	return nil
}

// Open opens a recording and reads its header and meta record.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader reads a recording from rd; name is used in errors.
func NewReader(name string, rd io.Reader) (*Reader, error) {
	r := &Reader{File: name, br: bufio.NewReaderSize(rd, 64<<10), netns: map[uint32]string{}, symbols: map[uint64]string{},
		rec: make([]byte, event.RecordSize+event.MaxIPv6Block+maxPacket)}
	var hdr [headerSize]byte
	n, err := io.ReadFull(r.br, hdr[:])
	switch {
	case n == 0 && (err == io.EOF || err == nil):
		return nil, r.errorf(0, "empty file: not a nettrace recording")
	case n >= 4 && !bytes.Equal(hdr[:min(n, 8)], Magic[:min(n, 8)]):
		return nil, r.errorf(0, "%s", notARecording(hdr[:n]))
	case err != nil:
		return nil, r.errorf(int64(n), "too short for a nettrace recording header (%d bytes)", n)
	}
	if v := binary.LittleEndian.Uint16(hdr[8:]); v < oldestVersion || v > Version {
		if v > Version {
			return nil, r.errorf(8, "format version %d is newer than this nettrace reads (%d): replay it with a newer nettrace", v, Version)
		}
		return nil, r.errorf(8, "invalid format version %d", v)
	}
	r.version = binary.LittleEndian.Uint16(hdr[8:])
	r.off = headerSize
	typ, payload, err := r.next()
	if err == io.EOF {
		return nil, &Error{r.File, headerSize, ErrTruncated}
	}
	if err != nil {
		return nil, err
	}
	if typ != recMeta {
		return nil, r.errorf(headerSize, "the first record is not the recording's description (type %d)", typ)
	}
	if err := json.Unmarshal(payload, &r.Meta); err != nil {
		return nil, r.errorf(headerSize, "unreadable description: %v", err)
	}
	return r, nil
}

// maxPacket bounds the packet bytes of one event record.
const maxPacket = 512

func notARecording(magic []byte) string {
	if len(magic) >= 4 {
		switch binary.LittleEndian.Uint32(magic) {
		case 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1:
			return "this is a pcap capture (tcpdump?), not a nettrace recording"
		case 0x0a0d0d0a:
			return "this is a pcapng capture, not a nettrace recording (nettrace export writes those; it cannot replay them)"
		}
	}
	return "not a nettrace recording (unknown magic number)"
}

func (r *Reader) errorf(off int64, format string, args ...any) *Error {
	return &Error{File: r.File, Offset: off, Err: fmt.Errorf(format, args...)}
}

// next reads one record, checking its length and checksum.
func (r *Reader) next() (byte, []byte, error) {
	start := r.off
	typ, err := r.br.ReadByte()
	if err == io.EOF {
		return 0, nil, io.EOF
	}
	if err != nil {
		return 0, nil, &Error{r.File, start, err}
	}
	length, err := binary.ReadUvarint(r.br)
	if err != nil {
		return 0, nil, r.truncated(start, err)
	}
	if length > maxRecord && (typ != recRuleset && typ != recServices || length > maxRulesetRecord) {
		return 0, nil, r.errorf(start, "record of %d bytes: the recording is corrupt", length)
	}
	if cap(r.payload) < int(length)+4 {
		r.payload = make([]byte, length+4)
	}
	buf := r.payload[:length+4]
	if _, err := io.ReadFull(r.br, buf); err != nil {
		return 0, nil, r.truncated(start, err)
	}
	payload := buf[:length]
	want := binary.LittleEndian.Uint32(buf[length:])
	if crc := crc32.Update(crc32.Checksum([]byte{typ}, crcTable), crcTable, payload); crc != want {
		return 0, nil, r.errorf(start, "record corrupt (checksum mismatch)")
	}
	r.off = start + 1 + int64(uvarintLen(length)) + int64(length) + 4
	r.records++
	return typ, payload, nil
}

func (r *Reader) truncated(start int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{r.File, start, ErrTruncated}
	}
	return &Error{r.File, start, err}
}

func uvarintLen(v uint64) int {
	return len(binary.AppendUvarint(nil, v))
}

// ErrNoEnd reports a recording that stops at a record boundary without its
// closing summary: the recorder was killed. Every record was read.
var ErrNoEnd = errors.New("the recording has no closing summary (the recorder was killed?); every complete record was read")

// Next reads the next event into e. It returns io.EOF at the end of a
// complete recording; an *Error wrapping ErrTruncated or ErrNoEnd for one
// that was cut off (the events before were all returned); another *Error
// for a corrupt one. e.Packet refers to a buffer reused by the next call.
func (r *Reader) Next(e *event.Event) error {
	for {
		start := r.off
		typ, payload, err := r.next()
		if err == io.EOF {
			if r.Summary == nil {
				return &Error{r.File, start, ErrNoEnd}
			}
			return io.EOF
		}
		if err != nil {
			return err
		}
		if r.Summary != nil {
			return r.errorf(start, "records after the closing summary: the recording is corrupt")
		}
		if typ == recEvent {
			if err := r.decodeEvent(payload, e); err != nil {
				return r.errorf(start, "%v", err)
			}
			return nil
		}
		if err := r.take(typ, payload, start); err != nil {
			return err
		}
	}
}

// take keeps what a record other than an event says (names, pods,
// rulesets, rule traces, losses, the summary); start is its offset.
func (r *Reader) take(typ byte, payload []byte, start int64) error {
	switch typ {
	case recNetns, recSymbol, recPods, recNodes, recRuleTrace:
		if err := r.hold(len(payload)); err != nil {
			return r.errorf(start, "%s record: %v", recordNames[typ], err)
		}
	}
	switch typ {
	case recNetns:
		if len(payload) < 4 {
			return r.errorf(start, "namespace record too short")
		}
		r.names.Lock()
		r.netns[binary.LittleEndian.Uint32(payload)] = string(payload[4:])
		r.names.Unlock()
	case recSymbol:
		if len(payload) < 8 {
			return r.errorf(start, "symbol record too short")
		}
		r.names.Lock()
		r.symbols[binary.LittleEndian.Uint64(payload)] = string(payload[8:])
		r.names.Unlock()
	case recPods, recNodes:
		names, err := decodeAddresses(payload)
		if err != nil {
			return r.errorf(start, "%s record: %v", recordNames[typ], err)
		}
		book := &r.pods
		if typ == recNodes {
			book = &r.nodes
		}
		r.names.Lock()
		*book = addressBook{gen: book.gen + 1, names: names}
		r.names.Unlock()
	case recServices:
		t, inflated, err := decodeServices(payload, MaxHeld-r.held)
		if err == nil {
			err = r.hold(inflated)
		}
		if err != nil {
			return r.errorf(start, "%s record: %v", recordNames[typ], err)
		}
		r.names.Lock()
		r.services = serviceBook{gen: r.services.gen + 1, table: t}
		r.names.Unlock()
	case recRuleset:
		snap, err := decodeRuleset(payload, r.version, MaxHeld-r.held)
		if err == nil {
			err = r.hold(len(snap.Text) + len(snap.Text6) + len(snap.Native))
		}
		if err != nil {
			return r.errorf(start, "ruleset record: %v", err)
		}
		r.Rulesets.Add(snap)
	case recRuleTrace:
		t, err := decodeRuleTrace(payload)
		if err != nil {
			return r.errorf(start, "rule trace record: %v", err)
		}
		r.RuleTraces.Add(t)
	case recLoss:
		win, through, tick, err := decodeLoss(payload)
		switch {
		case err != nil:
			return r.errorf(start, "%v", err)
		case tick != 0:
			if r.OnTick != nil {
				r.OnTick(tick)
			}
		case r.OnLoss != nil:
			r.OnLoss(win, through)
		}
	case recSummary:
		var s Summary
		if err := json.Unmarshal(payload, &s); err != nil {
			return r.errorf(start, "unreadable summary: %v", err)
		}
		r.Summary = &s
	default:
		return r.errorf(start, "unknown record type %d: the recording is corrupt", typ)
	}
	return nil
}

func (r *Reader) decodeEvent(p []byte, e *event.Event) error {
	const words = event.RecordSize / 8
	if len(p) < 4 {
		return errors.New("event record too short")
	}
	mask := binary.LittleEndian.Uint32(p)
	if mask>>words != 0 {
		return errors.New("event record corrupt")
	}
	p = p[4:]
	if len(p) < 8*bits.OnesCount32(mask) {
		return errors.New("event record too short")
	}
	rec := r.rec[:event.RecordSize]
	for i := 0; i < words; i++ {
		if mask&(1<<i) != 0 {
			copy(rec[i*8:i*8+8], p[:8])
			p = p[8:]
		} else {
			clear(rec[i*8 : i*8+8])
		}
	}
	if len(p) > event.MaxIPv6Block+maxPacket {
		return fmt.Errorf("event record carries %d bytes past its fixed part", len(p))
	}
	copy(r.rec[event.RecordSize:], p)
	if err := event.Decode(r.rec[:event.RecordSize+len(p)], e); err != nil {
		return err
	}
	if n := event.RecordedLen(e); n != event.RecordSize+len(p) {
		return fmt.Errorf("event record carries %d bytes, says %d", event.RecordSize+len(p), n)
	}
	return nil
}

// NetnsName names a namespace inode as the recording host did. Safe to
// call while another goroutine reads events.
func (r *Reader) NetnsName(ino uint32) string {
	r.names.RLock()
	defer r.names.RUnlock()
	return r.netns[ino]
}

// NetnsNames are the names of the namespaces read so far.
func (r *Reader) NetnsNames() []string {
	r.names.RLock()
	defer r.names.RUnlock()
	return slices.Collect(maps.Values(r.netns))
}

// SymbolName names a kernel address as the recording host did. Safe to
// call while another goroutine reads events.
func (r *Reader) SymbolName(addr uint64) string {
	r.names.RLock()
	defer r.names.RUnlock()
	return r.symbols[addr]
}

// PodAddresses are the pods' addresses (namespace/name) as the recording
// host last knew them, with a generation that changes when they do. Safe
// to call while another goroutine reads events; the map is never changed.
func (r *Reader) PodAddresses() (uint64, map[netip.Addr]string) {
	r.names.RLock()
	defer r.names.RUnlock()
	return r.pods.gen, r.pods.names
}

// NodeAddresses are the nodes' addresses (node name) as the recording
// host last knew them, as PodAddresses.
func (r *Reader) NodeAddresses() (uint64, map[netip.Addr]string) {
	r.names.RLock()
	defer r.names.RUnlock()
	return r.nodes.gen, r.nodes.names
}

// ServiceFrontends are the Services' frontends as the recording host last
// knew them, as PodAddresses.
func (r *Reader) ServiceFrontends() (uint64, *service.Table) {
	r.names.RLock()
	defer r.names.RUnlock()
	return r.services.gen, r.services.table
}

// booksRead counts the address and service records read: it changes when
// any book does. Only the goroutine reading events may call it unlocked.
func (r *Reader) booksRead() uint64 { return r.pods.gen + r.nodes.gen + r.services.gen }

// Close closes the file.
func (r *Reader) Close() error {
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}
