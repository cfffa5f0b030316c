package trace

import (
	"time"
)

// Meta describes a recording: everything replay needs that the events do
// not carry, so that replay never consults the local kernel.
type Meta struct {
	Nettrace string    `json:"nettrace"`
	Created  time.Time `json:"created"`
	Host     string    `json:"host"`
	Kernel   Kernel    `json:"kernel"`
	Points   []Point   `json:"points"`
	Filter   string    `json:"filter"`
	SnapLen  uint32    `json:"snaplen"`
	// The clock anchor: kernel monotonic time MonoNS was wall time WallNS.
	MonoNS int64 `json:"mono_ns"`
	WallNS int64 `json:"wall_ns"`
	// AnchorErrNS is how far the anchor's wall time can be from the true
	// wall time at MonoNS: the two clocks are read one after the other.
	// Clock alignment widens its bounds by it.
	AnchorErrNS int64 `json:"anchor_err_ns,omitempty"`
	// DropReasons are the recording kernel's enum skb_drop_reason names.
	DropReasons map[uint32]string `json:"drop_reasons"`
	// Run identifies one recording run; Part numbers its files from 1 when
	// a Recorder splits it (RecordOptions.FileBytes), so that replay puts
	// the parts it is given back together as one recording.
	Run  string `json:"run,omitempty"`
	Part int    `json:"part,omitempty"`
	// LossMarks says the recording has loss records as the run counted
	// its losses: replay decides each flow's completeness from them.
	// Without them (older recordings, flight recorder windows) every flow
	// replays as complete.
	LossMarks bool `json:"loss_marks,omitempty"`
	// Ticks says the recording has the run's ticks among its events: where
	// and at what kernel time it ended the flows idle. Replay ends flows
	// there and only there, so that its flows are the run's even when a
	// packet's last steps, held by an idle CPU, came after its flow went
	// idle by the other CPUs' clock. Without them replay ends flows every
	// few thousand events.
	Ticks bool `json:"ticks,omitempty"`
}

// Kernel is what a recording says of the kernel it was made on.
type Kernel struct {
	Release  string `json:"release"`
	BTF      bool   `json:"btf"`
	Lockdown string `json:"lockdown"`
	Kprobes  bool   `json:"kprobes"`
}

// Point is how one observation point was attached while recording, or why
// it could not be.
type Point struct {
	Point       string        `json:"point"`
	Method      string        `json:"method,omitempty"`
	Target      string        `json:"target,omitempty"`
	Note        string        `json:"note,omitempty"`
	Unavailable []Unavailable `json:"unavailable,omitempty"`
}

// Unavailable is a method a point could not use, and why.
type Unavailable struct {
	Method string `json:"method"`
	Reason string `json:"reason"`
}

// Wall converts an event time to wall-clock time with the anchor.
func (m *Meta) Wall(mono uint64) time.Time {
	return time.Unix(0, m.WallNS+(int64(mono)-m.MonoNS))
}

// Mono converts a wall-clock time back to the recording's monotonic clock.
func (m *Meta) Mono(wall time.Time) uint64 {
	return uint64(wall.UnixNano() - m.WallNS + m.MonoNS)
}

// Summary closes a complete recording, or one part of it.
type Summary struct {
	Events map[string]uint64 `json:"events"`
	Lost   map[string]uint64 `json:"lost"`
	Shed   map[string]uint64 `json:"shed,omitempty"`
	Ended  time.Time         `json:"ended"`
	// Continued says the recording goes on in its next part: the counts
	// of the whole run are in the last part's summary.
	Continued bool `json:"continued,omitempty"`
	// Unwritten counts the events the recorder could not write (a full
	// disk, a disk slower than the events), in the whole run.
	Unwritten uint64 `json:"unwritten,omitempty"`
}
