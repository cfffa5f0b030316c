package trace

import (
	"time"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/probe"
)

// Meta describes a recording: everything replay needs that the events do
// not carry, so that replay never consults the local kernel.
type Meta struct {
	Nettrace string         `json:"nettrace"`
	Created  time.Time      `json:"created"`
	Host     string         `json:"host"`
	Kernel   kernel.Facts   `json:"kernel"`
	Points   []probe.Status `json:"points"`
	Filter   string         `json:"filter"`
	SnapLen  uint32         `json:"snaplen"`
	// The clock anchor: kernel monotonic time MonoNS was wall time WallNS.
	MonoNS int64 `json:"mono_ns"`
	WallNS int64 `json:"wall_ns"`
	// DropReasons are the recording kernel's enum skb_drop_reason names.
	DropReasons map[uint32]string `json:"drop_reasons"`
}

// Wall converts an event time to wall-clock time with the anchor.
func (m *Meta) Wall(mono uint64) time.Time {
	return time.Unix(0, m.WallNS+(int64(mono)-m.MonoNS))
}

// Summary closes a complete recording.
type Summary struct {
	Events map[string]uint64 `json:"events"`
	Lost   map[string]uint64 `json:"lost"`
	Ended  time.Time         `json:"ended"`
}
