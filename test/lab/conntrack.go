package lab

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// ConntrackInsertFailed is how many new conntrack entries namespace ns
// failed to insert since it was made: insert_failed of
// /proc/net/stat/nf_conntrack summed over CPUs (what `conntrack -S`
// prints). Each is a packet conntrack dropped at confirmation because an
// entry for its tuple was inserted first (a clash), which is how a test
// tells a true conntrack-clash finding from a false one.
func ConntrackInsertFailed(ns string) (uint64, error) {
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/stat/nf_conntrack").Output()
	if err != nil {
		return 0, fmt.Errorf("conntrack statistics of %s: %w", ns, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	column := -1
	for i, name := range strings.Fields(lines[0]) {
		if name == "insert_failed" {
			column = i
		}
	}
	if column < 0 {
		return 0, fmt.Errorf("conntrack statistics of %s: no insert_failed column in %q", ns, lines[0])
	}
	var sum uint64
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if column >= len(f) {
			return 0, fmt.Errorf("conntrack statistics of %s: short row %q", ns, line)
		}
		n, err := strconv.ParseUint(f[column], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("conntrack statistics of %s: %w", ns, err)
		}
		sum += n
	}
	return sum, nil
}
