// Package kernel reads what the running kernel offers nettrace: version,
// BTF, lockdown, kprobe support, symbols and drop-reason names. Every
// decision about how to attach is made from these facts at run time.
package kernel

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Facts is what nettrace needs to know about the running kernel.
type Facts struct {
	Release  string `json:"release"`
	BTF      bool   `json:"btf"`
	Lockdown string `json:"lockdown"`
	Kprobes  bool   `json:"kprobes"`
}

const (
	btfPath      = "/sys/kernel/btf/vmlinux"
	securityfs   = "/sys/kernel/security"
	lockdownPath = securityfs + "/lockdown"
	kprobePMU    = "/sys/bus/event_source/devices/kprobe"
)

// Probe gathers the facts. Mounts it performs (securityfs to read the
// lockdown mode) are reported through mounted.
func Probe(mounted func(what, where string)) Facts {
	var f Facts
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		f.Release = unix.ByteSliceToString(u.Release[:])
	}
	_, err := os.Stat(btfPath)
	f.BTF = err == nil
	f.Lockdown = readLockdown(mounted)
	_, err = os.Stat(kprobePMU)
	f.Kprobes = err == nil
	return f
}

func readLockdown(mounted func(what, where string)) string {
	b, err := os.ReadFile(lockdownPath)
	if errors.Is(err, os.ErrNotExist) {
		if merr := unix.Mount("securityfs", securityfs, "securityfs", 0, ""); merr == nil {
			mounted("securityfs", securityfs)
			b, err = os.ReadFile(lockdownPath)
		}
	}
	if err != nil {
		return "unknown"
	}
	// The active mode is bracketed: "none [integrity] confidentiality".
	s := string(b)
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return strings.TrimSpace(s)
}

const tracefs = "/sys/kernel/tracing"

// EnsureTracefs mounts tracefs when classic tracepoints need it.
func EnsureTracefs(mounted func(what, where string)) error {
	if _, err := os.Stat(tracefs + "/events"); err == nil {
		return nil
	}
	if err := unix.Mount("tracefs", tracefs, "tracefs", 0, ""); err != nil {
		return fmt.Errorf("mount tracefs at %s: %w", tracefs, err)
	}
	mounted("tracefs", tracefs)
	return nil
}

// ClockAnchor pairs a CLOCK_MONOTONIC time with the wall time at that
// instant, which puts BPF timestamps on the wall clock. The two clocks
// cannot be read at once: the wall clock is read between two monotonic
// readings, and the tightest of anchorTries tries is kept, since a try the
// scheduler interrupted brackets tens of microseconds (which, taken as
// exact, would misplace every event by as much). uncertainty is how far
// the pair can be off: half the kept bracket.
func ClockAnchor() (mono, wall, uncertainty int64, err error) {
	uncertainty = math.MaxInt64
	for range anchorTries {
		var before, at, after unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &before); err != nil {
			return 0, 0, 0, fmt.Errorf("read the monotonic clock: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &at); err != nil {
			return 0, 0, 0, fmt.Errorf("read the wall clock: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &after); err != nil {
			return 0, 0, 0, fmt.Errorf("read the monotonic clock: %w", err)
		}
		half := (after.Nano() - before.Nano() + 1) / 2
		if half < uncertainty {
			mono, wall, uncertainty = before.Nano()+half, at.Nano(), half
		}
	}
	return mono, wall, uncertainty, nil
}

const anchorTries = 16

// MonotonicNow is CLOCK_MONOTONIC in nanoseconds, the clock of BPF
// timestamps (bpf_ktime_get_ns).
func MonotonicNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}
