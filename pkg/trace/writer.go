package trace

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"os"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// Namer gives the names a recording must carry for replay.
type Namer interface {
	NetnsName(ino uint32) string
	SymbolName(addr uint64) string
	// PodAddresses are the pods' addresses (namespace/name), with a
	// generation that changes when they do; the map is never changed.
	PodAddresses() (uint64, map[netip.Addr]string)
	// NodeAddresses are the nodes' addresses (node name), likewise.
	NodeAddresses() (uint64, map[netip.Addr]string)
	// ServiceFrontends are the Services' frontends, likewise.
	ServiceFrontends() (uint64, *service.Table)
}

// Writer writes a recording as a stream: to a file of its own (Create),
// or encoded into a Recorder's chunks.
type Writer struct {
	f       *os.File // nil in a Recorder
	bw      *bufio.Writer
	out     io.Writer // bw, or the Recorder's chunk
	names   Namer
	netns   map[uint32]string // the names written
	symbols map[uint64]bool
	podGen  uint64 // the generation of the pod addresses written
	nodeGen uint64 // and of the node addresses
	svcGen  uint64 // and of the Service frontends
	rec     []byte
	scratch []byte
	sparse  []byte // an event's sparse form, reused: one allocation per event was the recorder's bottleneck
	events  uint64
	bytes   int64
}

// Create starts a recording at path, readable by its owner only: it
// holds packet headers from the host.
func Create(path string, meta Meta, names Namer) (*Writer, error) {
	f, err := createRecording(path)
	if err != nil {
		return nil, err
	}
	w := newWriter(names)
	w.f, w.bw = f, bufio.NewWriterSize(f, 64<<10)
	w.out = w.bw
	if err := w.begin(meta); err != nil {
		return nil, w.fail(err)
	}
	return w, nil
}

func newWriter(names Namer) *Writer {
	return &Writer{names: names, netns: map[uint32]string{}, symbols: map[uint64]bool{},
		scratch: make([]byte, event.RecordSize+event.MaxIPv6Block+maxPacket)}
}

// begin writes the header and the meta record that start a recording
// file, and forgets the names written to an earlier file.
func (w *Writer) begin(meta Meta) error {
	w.forgetNames()
	var hdr [headerSize]byte
	copy(hdr[:], Magic[:])
	binary.LittleEndian.PutUint16(hdr[8:], Version)
	n, err := w.out.Write(hdr[:])
	w.bytes += int64(n)
	if err != nil {
		return err
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	return w.record(recMeta, js)
}

// forgetNames makes the names be written again before the events that
// need them: into a new file, or after records that never reached it.
func (w *Writer) forgetNames() {
	clear(w.netns)
	clear(w.symbols)
	w.podGen, w.nodeGen, w.svcGen = 0, 0, 0
}

func (w *Writer) fail(err error) error {
	w.f.Close()
	return fmt.Errorf("write recording %s: %w", w.f.Name(), err)
}

func (w *Writer) record(typ byte, payload []byte) error {
	w.rec = w.rec[:0]
	w.rec = append(w.rec, typ)
	w.rec = binary.AppendUvarint(w.rec, uint64(len(payload)))
	w.rec = append(w.rec, payload...)
	crc := crc32.Update(crc32.Checksum([]byte{typ}, crcTable), crcTable, payload)
	w.rec = binary.LittleEndian.AppendUint32(w.rec, crc)
	n, err := w.out.Write(w.rec)
	w.bytes += int64(n)
	return err
}

// Event appends an event, preceded by the names it needs that the
// recording does not have yet.
func (w *Writer) Event(e *event.Event) error {
	// A namespace's name may change once (a pod's replacing a process's):
	// the recording then carries the new one from there on.
	if name := w.names.NetnsName(e.Netns); e.Netns != 0 && w.netns[e.Netns] != name {
		w.netns[e.Netns] = name
		p := binary.LittleEndian.AppendUint32(nil, e.Netns)
		if err := w.record(recNetns, append(p, name...)); err != nil {
			return err
		}
	}
	if e.Point == event.PointDrop && !w.symbols[e.Drop.Location] {
		w.symbols[e.Drop.Location] = true
		p := binary.LittleEndian.AppendUint64(nil, e.Drop.Location)
		if err := w.record(recSymbol, append(p, w.names.SymbolName(e.Drop.Location)...)); err != nil {
			return err
		}
	}
	if gen, pods := w.names.PodAddresses(); gen != w.podGen {
		w.podGen = gen
		if err := w.record(recPods, encodeAddresses(pods)); err != nil {
			return err
		}
	}
	if gen, nodes := w.names.NodeAddresses(); gen != w.nodeGen {
		w.nodeGen = gen
		if err := w.record(recNodes, encodeAddresses(nodes)); err != nil {
			return err
		}
	}
	if gen, services := w.names.ServiceFrontends(); gen != w.svcGen {
		w.svcGen = gen
		p, err := encodeServices(services)
		if err != nil {
			return err
		}
		if err := w.record(recServices, p); err != nil {
			return err
		}
	}
	n := event.Encode(e, w.scratch)
	w.events++
	w.sparse = appendSparse(w.sparse[:0], w.scratch[:event.RecordSize], w.scratch[event.RecordSize:n])
	return w.record(recEvent, w.sparse)
}

// Ruleset appends a namespace's ruleset, in force from the snapshot's
// time on.
func (w *Writer) Ruleset(s ruleset.Snapshot) error {
	p, err := encodeRuleset(s)
	if err != nil {
		return err
	}
	return w.record(recRuleset, p)
}

// Losses appends a loss record: the window's lost records, and that every
// loss before through is counted.
func (w *Writer) Losses(win event.LossWindow, through uint64) error {
	return w.record(recLoss, encodeLoss(win, through))
}

// Tick appends a tick: the run ended the flows idle at kernel time at here,
// among its events (Meta.Ticks).
func (w *Writer) Tick(at uint64) error {
	return w.record(recLoss, encodeTick(at))
}

func encodeLoss(win event.LossWindow, through uint64) []byte {
	p := binary.AppendUvarint(nil, win.From)
	p = binary.AppendUvarint(p, win.To)
	p = binary.AppendUvarint(p, win.N)
	return binary.AppendUvarint(p, through)
}

// encodeTick writes a tick as a loss record that counts nothing, with the
// tick's time after its four fields: a reader that knows only loss records
// reads an empty window and ignores the rest.
func encodeTick(at uint64) []byte {
	return binary.AppendUvarint(encodeLoss(event.LossWindow{}, 0), at)
}

// decodeLoss reads a loss record: a window and how far losses are
// counted, or (tick non-zero) a tick.
func decodeLoss(p []byte) (win event.LossWindow, through, tick uint64, err error) {
	for _, v := range []*uint64{&win.From, &win.To, &win.N, &through} {
		n := 0
		if *v, n = binary.Uvarint(p); n <= 0 {
			return win, 0, 0, errors.New("loss record too short")
		}
		p = p[n:]
	}
	if len(p) > 0 {
		if tick, _ = binary.Uvarint(p); tick == 0 {
			return win, 0, 0, errors.New("loss record with a tick at 0")
		}
	}
	return win, through, tick, nil
}

// RuleTrace appends a step of nftables tracing.
func (w *Writer) RuleTrace(t *ruleset.Trace) error {
	return w.record(recRuleTrace, encodeRuleTrace(t))
}

// Flush makes everything written so far reach the file (what a SIGKILL
// would then leave readable).
func (w *Writer) Flush() error { return w.bw.Flush() }

// Close writes the summary that marks a complete recording and closes it.
func (w *Writer) Close(s Summary) error {
	err := w.summary(s)
	if ferr := w.bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write recording %s: %w", w.f.Name(), err)
	}
	return nil
}

func (w *Writer) summary(s Summary) error {
	js, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return w.record(recSummary, js)
}

// Stats returns the events and bytes written so far.
func (w *Writer) Stats() (events uint64, bytes int64) { return w.events, w.bytes }

// appendSparse writes a kernel record as a bitmap of its non-zero 8-byte
// words and those words (most of a record is zero: the union and the
// conntrack part of packets without one), then the packet bytes.
func appendSparse(dst, rec, pkt []byte) []byte {
	const words = event.RecordSize / 8
	var mask uint32
	for i := 0; i < words; i++ {
		if binary.LittleEndian.Uint64(rec[i*8:]) != 0 {
			mask |= 1 << i
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, mask)
	for i := 0; i < words; i++ {
		if mask&(1<<i) != 0 {
			dst = append(dst, rec[i*8:i*8+8]...)
		}
	}
	return append(dst, pkt...)
}
