package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Conntrack table full (issue 31, item 8).
const (
	// TableFullMax is the conntrack limit the faulty scenario sets, and
	// the connections pod p1 holds open to fill the tables of the nodes
	// they cross.
	TableFullMax = 64
	// FillerPort is where p1's held connections go (p2 holds each open).
	FillerPort = 8081
	// OwnKernelEnv, set to 1, says the kernel is the tests' own (a qemu
	// guest): a scenario may change what the whole kernel is held to.
	OwnKernelEnv = "NETTRACE_OWN_KERNEL"
)

// conntrackMaxFile is where the conntrack limit is set, in the initial
// namespace only: every namespace's table is held to it.
const conntrackMaxFile = "/proc/sys/net/netfilter/nf_conntrack_max"

// savedConntrackMax keeps the limit a scenario replaced, for Down.
var savedConntrackMax = filepath.Join(StateDir, "nf_conntrack_max")

// conntrackTableFull: pod p1 opens TableFullMax connections at once to p2
// (on node 2), holds those that connect, and then calls p2 on its own
// port. With the kernel's conntrack limit at TableFullMax, the tables of
// the nodes the connections cross fill (each connection takes an entry,
// and its tunnel's UDP flows one each way) with assured entries, which
// conntrack never evicts to make room, and it drops the call's SYN and its
// retransmissions. The twin keeps the kernel's limit.
func conntrackTableFull(healthy bool, f Family) *Scenario {
	sc := &Scenario{
		Description: fmt.Sprintf("pod p1 holds %d connections open to pod p2 on node 2, then calls %s; nf_conntrack_max is %d",
			TableFullMax, f.HostPort(Pod2IP, PodPort), TableFullMax),
		Pods:    basePods,
		Servers: []Server{{Pod: "p2", Port: PodPort, Accept: true}, {Pod: "p2", Port: FillerPort, Accept: true, Hold: true}},
		Rules:   map[string]string{NsNode1: nodeRules(f, 0), NsNode2: nodeRules(f, 1)},
		Clients: []Client{
			{Namespace: Prefix + "p1", Target: f.HostPort(Pod2IP, FillerPort), Count: TableFullMax, Concurrent: true,
				Timeout: 2 * time.Second, Keep: true},
			{Namespace: Prefix + "p1", Target: f.HostPort(Pod2IP, PodPort), Count: 1, Timeout: 4 * time.Second},
		},
	}
	if !healthy {
		sc.ConntrackMax = TableFullMax
	}
	return sc
}

// setConntrackMax sets the kernel's conntrack limit, keeping the one it
// replaces for Down, where the kernel is the tests' own only.
func setConntrackMax(limit int) error {
	if os.Getenv(OwnKernelEnv) != "1" {
		return fmt.Errorf("the scenario sets nf_conntrack_max, which every namespace of this machine is held to: it runs only where the kernel is the tests' own (%s=1, as in the qemu guests)", OwnKernelEnv)
	}
	old, err := os.ReadFile(conntrackMaxFile)
	if err != nil {
		return fmt.Errorf("read the conntrack limit: %w", err)
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(savedConntrackMax); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(savedConntrackMax, old, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(conntrackMaxFile, []byte(strconv.Itoa(limit)), 0o644)
}

// restoreConntrackMax puts back the limit a scenario replaced.
func restoreConntrackMax() error {
	old, err := os.ReadFile(savedConntrackMax)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(conntrackMaxFile, []byte(strings.TrimSpace(string(old))), 0o644); err != nil {
		return fmt.Errorf("restore the conntrack limit: %w", err)
	}
	return os.Remove(savedConntrackMax)
}
