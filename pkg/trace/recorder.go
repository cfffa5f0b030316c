package trace

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// RecordOptions bound a Recorder's disk and memory.
type RecordOptions struct {
	// FileBytes splits the recording into files of about this size (a
	// file ends at the first record past it): PATH.1, PATH.2, ... Zero
	// writes PATH alone.
	FileBytes int64
	// Files keeps only the newest this many files, removing the oldest
	// (with FileBytes). Zero keeps them all.
	Files int
	// QueueBytes bounds the encoded records waiting for the disk. Past it
	// records are not written (counted): the caller is never held up.
	QueueBytes int
	// Problem is told, from the Recorder's writing goroutine, when writing
	// stops (a full disk) and when it resumes; nil when no one is told.
	Problem func(err error, resumed bool)
}

// chunkBytes is what the caller encodes before handing it to the disk.
const chunkBytes = 256 << 10

// retryEvery is how often a Recorder whose disk failed tries again.
const retryEvery = time.Second

// Recorder writes a recording the way a long unattended run needs: the
// caller only encodes records into memory, a goroutine of the Recorder's
// own writes them, so a slow or full disk never holds up the event path;
// a recording can be split into files of a bounded size of which only the
// newest are kept, each a recording of its own (it starts with the meta
// record and the rulesets in force, and ends with a summary), so each
// replays alone and the set replays as one; a full disk stops the writing
// (said once), the files keep every record written whole, and writing
// resumes when space returns. Every event is counted as written or not.
type Recorder struct {
	path  string
	opts  RecordOptions
	meta  Meta
	enc   *Writer
	chunk *chunk
	// fileBytes is what the current file holds, with what is encoded for
	// it.
	fileBytes int64
	// rulesets are the newest of each namespace, written again at the
	// start of every file and after records that were not written.
	rulesets map[uint32]ruleset.Snapshot
	// restart says the next chunk must start again what records not
	// written would have left out: the names and rulesets, and the file
	// when the records that began it did not reach the disk.
	restart  bool
	retryAt  time.Time
	queue    chan *chunk
	free     chan *chunk
	done     chan struct{}
	disk     diskState
	encoded  uint64
	failed   atomic.Bool // set by the disk goroutine on an error
	fileLost atomic.Bool // set by it when the file it began is gone
}

// chunk is records on their way to the disk.
type chunk struct {
	bytes.Buffer
	events uint64
	// file, when set, is the file the chunk starts (a header first).
	file string
	// resume says the records before it may not have reached the file:
	// a disk that failed writes again from the chunk.
	resume bool
}

// diskState is the disk goroutine's.
type diskState struct {
	f         *os.File
	boundary  int64 // the file's length up to its last whole record
	files     []string
	suspended bool
	err       error // the first write error, for Close
	written   atomic.Uint64
	unwritten atomic.Uint64
	bytes     atomic.Int64
}

// NewRecorder starts a recording at path (at path.1 when split), readable
// by its owner only: it holds packet headers from the host.
func NewRecorder(path string, meta Meta, names Namer, opts RecordOptions) (*Recorder, error) {
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = 64 << 20
	}
	if opts.Files > 0 && opts.FileBytes == 0 {
		return nil, errors.New("a count of files needs a file size to rotate at")
	}
	run := make([]byte, 8)
	rand.Read(run)
	meta.Run = hex.EncodeToString(run)
	slots := max(opts.QueueBytes/chunkBytes, 2)
	r := &Recorder{path: path, opts: opts, meta: meta, enc: newWriter(names), rulesets: map[uint32]ruleset.Snapshot{},
		queue: make(chan *chunk, slots), free: make(chan *chunk, slots+1), done: make(chan struct{})}
	// The first file is created here, so that a path that cannot be
	// written is said at once.
	first := r.nextFile()
	f, err := createRecording(first)
	if err != nil {
		return nil, err
	}
	r.disk.f = f
	r.disk.files = append(r.disk.files, first)
	r.startChunk()
	r.beginFile(first)
	r.chunk.file = "" // created already
	go r.write()
	return r, nil
}

func createRecording(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	// An existing file keeps its mode through O_TRUNC.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("create recording: %w", err)
	}
	return f, nil
}

// nextFile names the next file and numbers the meta record's part.
func (r *Recorder) nextFile() string {
	if r.opts.FileBytes == 0 {
		return r.path
	}
	r.meta.Part++
	return fmt.Sprintf("%s.%d", r.path, r.meta.Part)
}

// startChunk begins the chunk the next records go to, with what a file
// or a gap needs first.
func (r *Recorder) startChunk() {
	select {
	case r.chunk = <-r.free:
		r.chunk.Reset()
		r.chunk.events, r.chunk.file, r.chunk.resume = 0, "", false
	default:
		r.chunk = &chunk{}
	}
	r.chunk.Grow(chunkBytes)
	r.enc.out = r.chunk
}

// beginFile starts a file in the current chunk: header, meta, the
// rulesets in force.
func (r *Recorder) beginFile(path string) {
	r.chunk.file = path
	r.enc.bytes = 0
	r.enc.begin(r.meta)
	r.writeRulesets()
	r.fileBytes = r.enc.bytes
}

func (r *Recorder) writeRulesets() {
	for _, s := range r.rulesets {
		if p, err := encodeRuleset(s); err == nil {
			r.enc.record(recRuleset, p)
		}
	}
}

// prepare makes the current chunk ready for a record, or says the
// records are not written: the disk failed, and the time to try it again
// has not come. After records that were not written, it starts again
// what they may have carried.
func (r *Recorder) prepare() bool {
	if r.failed.Load() {
		now := time.Now()
		if r.retryAt.IsZero() {
			r.retryAt = now.Add(retryEvery)
		}
		if now.Before(r.retryAt) {
			return false
		}
		r.retryAt = time.Time{}
		r.failed.Store(false)
		r.restart = true
	}
	if !r.restart {
		return true
	}
	r.restart = false
	r.chunk.resume = true
	if r.fileLost.Swap(false) {
		r.meta.Part--
		r.beginFile(r.nextFile())
		return true
	}
	r.enc.forgetNames()
	r.writeRulesets()
	return true
}

// Event records an event.
func (r *Recorder) Event(e *event.Event) {
	r.encoded++
	if !r.prepare() {
		r.disk.unwritten.Add(1)
		return
	}
	before := r.enc.bytes
	r.enc.Event(e)
	r.chunk.events++
	r.fileBytes += r.enc.bytes - before
	r.afterRecord()
}

// Ruleset records a namespace's ruleset, in force from the snapshot's
// time on.
func (r *Recorder) Ruleset(s ruleset.Snapshot) error {
	if _, err := encodeRuleset(s); err != nil {
		return err
	}
	r.rulesets[s.Netns] = s
	if !r.prepare() {
		return nil
	}
	p, _ := encodeRuleset(s)
	r.enc.record(recRuleset, p)
	r.afterRecord()
	return nil
}

// Losses records a loss window and how far losses are counted.
func (r *Recorder) Losses(win event.LossWindow, through uint64) {
	if !r.prepare() {
		return
	}
	r.enc.record(recLoss, encodeLoss(win, through))
	r.afterRecord()
}

// Tick records that the run ended the flows idle at kernel time at, here
// among its events.
func (r *Recorder) Tick(at uint64) {
	if !r.prepare() {
		return
	}
	r.enc.record(recLoss, encodeTick(at))
	r.afterRecord()
}

// RuleTrace records a step of nftables tracing.
func (r *Recorder) RuleTrace(t *ruleset.Trace) {
	if !r.prepare() {
		return
	}
	r.enc.record(recRuleTrace, encodeRuleTrace(t))
	r.afterRecord()
}

// afterRecord hands a full chunk to the disk and ends a full file.
func (r *Recorder) afterRecord() {
	if r.opts.FileBytes > 0 && r.fileBytes >= r.opts.FileBytes {
		r.enc.summary(Summary{Ended: time.Now().UTC(), Continued: true})
		r.ship()
		r.beginFile(r.nextFile())
		return
	}
	if r.chunk.Len() >= chunkBytes {
		r.ship()
	}
}

// ship hands the current chunk to the disk goroutine, unless its queue is
// full: then the chunk's events are counted as not written, and what they
// may have carried is started again.
func (r *Recorder) ship() {
	c := r.chunk
	if c.Len() == 0 && c.file == "" {
		return
	}
	select {
	case r.queue <- c:
	default:
		r.disk.unwritten.Add(c.events)
		r.restart = true
		if c.file != "" {
			// The file it began is not created: begin it again.
			r.fileLost.Store(true)
		}
	}
	r.startChunk()
}

// Flush hands what is encoded to the disk goroutine: within a tick of the
// caller, the file has it (what a SIGKILL leaves readable).
func (r *Recorder) Flush() {
	r.ship()
}

// write is the disk goroutine: it writes the chunks in order, creates and
// removes the files, and stops writing on an error until the caller
// resumes.
func (r *Recorder) write() {
	defer close(r.done)
	d := &r.disk
	for c := range r.queue {
		switch {
		case d.suspended && !c.resume:
			// Encoded before the caller knew: it starts again with
			// the chunk that resumes.
			d.unwritten.Add(c.events)
		default:
			wasSuspended := d.suspended
			d.suspended = false
			if err := r.writeChunk(c); err != nil {
				d.unwritten.Add(c.events)
				if d.err == nil {
					d.err = err
				}
				d.suspended = true
				r.failed.Store(true)
				if !wasSuspended && r.opts.Problem != nil {
					r.opts.Problem(err, false)
				}
				break
			}
			d.written.Add(c.events)
			if wasSuspended && r.opts.Problem != nil {
				r.opts.Problem(nil, true)
			}
		}
		select {
		case r.free <- c:
		default:
		}
	}
	if d.f != nil {
		d.f.Close()
	}
}

// writeChunk writes a chunk whole or not at all: on an error the file is
// cut back to its last whole record.
func (r *Recorder) writeChunk(c *chunk) error {
	d := &r.disk
	if c.file != "" {
		if d.f != nil {
			d.f.Close()
			d.f = nil
		}
		f, err := createRecording(c.file)
		if err != nil {
			return err
		}
		d.f, d.boundary = f, 0
		d.files = append(d.files, c.file)
		for r.opts.Files > 0 && len(d.files) > r.opts.Files {
			os.Remove(d.files[0])
			d.files = d.files[1:]
		}
	}
	if d.f == nil {
		return errors.New("no file to write to")
	}
	n, err := d.f.WriteAt(c.Bytes(), d.boundary)
	if err != nil {
		// Keep the file whole: a reader then replays every record in it.
		d.f.Truncate(d.boundary)
		if c.file != "" && d.boundary == 0 {
			// Not even its beginning fits: no file rather than one that
			// is not a recording, and the caller begins it again.
			d.f.Close()
			os.Remove(c.file)
			d.f = nil
			d.files = d.files[:len(d.files)-1]
			r.fileLost.Store(true)
		}
		return fmt.Errorf("write recording: %w", err)
	}
	d.boundary += int64(n)
	d.bytes.Add(int64(n))
	return nil
}

// RecordStats are what a Recorder did.
type RecordStats struct {
	Events    uint64 // events given
	Written   uint64 // of those, in the files
	Unwritten uint64 // of those, not: the disk failed or fell behind
	Bytes     int64  // written, in every file including removed ones
	Files     []string
	// Parts is the number of files made, removed ones included.
	Parts int
}

// Removed is the number of files removed to keep the newest.
func (s RecordStats) Removed() int { return s.Parts - len(s.Files) }

// Close writes the closing summary, waits for the disk and closes the
// file. The error is the first that stopped the writing, if any: the
// files hold every record written before it.
func (r *Recorder) Close(s Summary) (RecordStats, error) {
	s.Unwritten = r.disk.unwritten.Load()
	r.retryAt = time.Now() // a last try, whenever the disk failed
	if r.prepare() {
		r.enc.summary(s)
	}
	// The last chunk waits for room: the run is over.
	if c := r.chunk; c.Len() > 0 || c.file != "" {
		r.queue <- c
	}
	close(r.queue)
	<-r.done
	st := RecordStats{Events: r.encoded, Written: r.disk.written.Load(), Unwritten: r.disk.unwritten.Load(),
		Bytes: r.disk.bytes.Load(), Files: r.disk.files, Parts: max(r.meta.Part, 1)}
	return st, r.disk.err
}
