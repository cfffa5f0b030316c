// Package trace reads and writes nettrace recordings: self-contained
// streams of events that replay on any machine into the same flows and
// explanations as the live run (internal/output exports their packets to
// pcapng, for Wireshark).
//
// A recording is a header and a stream of records:
//
//	header  := magic[8] version:u16le flags:u16le
//	record  := type:u8 length:uvarint payload[length] crc32c(type, payload):u32le
//
// Record types: a meta record (JSON: the kernel, the observation points
// and their methods, the drop-reason names of the recording kernel, the
// clock anchor) comes first; namespace and symbol names are written
// before the first event that needs them, so every prefix of a recording
// is self-contained; a ruleset record holds a namespace's iptables ruleset
// (iptables-save's text, deflated) when the run starts and whenever it
// changes, so replay names rules too; pod address, node address and service
// frontend records hold what the Kubernetes API said of addresses when it
// last changed (pods.go); event records hold the kernel record in a sparse
// form (a bitmap of its non-zero 8-byte words, then those words) and the
// packet's first bytes; a loss record says which window of kernel time
// lost how many records and how far losses are counted (so that replay
// tells complete flows from incomplete ones as the live run did); a tick
// is a loss record with an empty window and a fifth field, the kernel time
// at which the run ended idle flows there among the events (Meta.Ticks: so
// that replay ends them at the same places; a reader that knows only four
// fields reads an empty window); a summary record (lost events per point) ends a
// complete recording. A recording cut off by a crash or a full disk reads
// up to its last complete record, and the reader says where it ends.
//
// A recording split into files (Recorder) is files that are each such a
// recording: each starts with the meta record, naming the run and its part
// number, then the rulesets in force, and ends with a summary that says
// the run continues in the next part (the last part's summary has the
// run's counts).
package trace

import (
	"errors"
	"fmt"
	"hash/crc32"
)

// Magic starts every recording. The first byte is not ASCII and a newline
// follows, so text-mode transfers and pcap files are told apart at once.
var Magic = [8]byte{0x8e, 'N', 'T', 'R', 'A', 'C', 'E', '\n'}

// Version is the format version this package writes. Version 2 added the
// packet's first-seen time (event.Event.SkbSeen) as the kernel record's last
// word; version 1 records decode with it zero, so both are read. Version 3
// added ruleset records, version 4 rule trace records, version 5 IPv6
// addresses (an event record with event.FlagIPv6 carries them after its
// fixed part; IPv4 events are recorded as before), version 6 ip6tables
// rulesets in ruleset records, version 7 loss records, version 8 pod
// address records, version 9 node address records, version 10 service
// frontend records.
const Version = 10

// oldestVersion is the oldest format version this package reads.
const oldestVersion = 1

const headerSize = 12

// Record types.
const (
	recMeta      = 1
	recNetns     = 2
	recSymbol    = 3
	recEvent     = 4
	recSummary   = 5
	recRuleset   = 6
	recRuleTrace = 7
	recLoss      = 8
	recPods      = 9
	recNodes     = 10
	recServices  = 11
)

// recordNames name the record types in errors.
var recordNames = map[byte]string{recMeta: "description", recNetns: "namespace", recSymbol: "symbol", recEvent: "event",
	recSummary: "summary", recRuleset: "ruleset", recRuleTrace: "rule trace", recLoss: "loss", recPods: "pod address",
	recNodes: "node address", recServices: "service frontend"}

// maxRecord bounds a record's length: a longer one is corruption. A
// ruleset or service frontend record may be longer (a large cluster's,
// deflated), up to maxRulesetRecord.
const (
	maxRecord        = 1 << 20
	maxRulesetRecord = 64 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Error is a problem at a place in a recording.
type Error struct {
	File   string
	Offset int64
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrTruncated reports a recording that ends inside a record: it was cut
// off while being written. Everything before Offset was read.
var ErrTruncated = errors.New("the recording ends inside a record (cut off while it was written); events up to here were read")
