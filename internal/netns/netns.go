// Package netns finds the network namespaces nettrace watches, names them
// for output, and runs code inside one (BPF netfilter links and sock_diag
// queries belong to the namespace of the calling thread).
package netns

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// SelfPath is the path of nettrace's own namespace.
const SelfPath = "/proc/self/ns/net"

// RunDir is where iproute2 and CNI plugins bind-mount named namespaces.
const RunDir = "/run/netns"

// runDirs are the places named namespaces are found: RunDir, and the
// /var/run/netns of hosts where /var/run is not a link to /run.
var runDirs = []string{RunDir, "/var/run/netns"}

// Target is one network namespace.
type Target struct {
	Name  string
	Path  string
	Inode uint32
}

func inode(path string) (uint32, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return uint32(st.Ino), nil
}

func selfName(ino uint32) string {
	if init, err := inode("/proc/1/ns/net"); err == nil && init == ino {
		return "host"
	}
	return "self"
}

// Named lists the namespaces under /run/netns and /var/run/netns.
func Named() []Target {
	var out []Target
	seen := map[uint32]bool{}
	for _, dir := range runDirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if ino, err := inode(p); err == nil && !seen[ino] {
				seen[ino] = true
				out = append(out, Target{Name: e.Name(), Path: p, Inode: ino})
			}
		}
	}
	return out
}

func current() (Target, error) {
	p := fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid())
	ino, err := inode(p)
	if err != nil {
		return Target{}, fmt.Errorf("read own network namespace: %w", err)
	}
	return Target{Name: selfName(ino), Path: SelfPath, Inode: ino}, nil
}

// processes lists the namespaces processes are in for which want is true,
// one target per namespace, named after the process that best tells what
// lives there (see better). A node has thousands of processes: only those
// in a wanted namespace have their name read.
func processes(want func(ino uint32) bool) []Target {
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	byInode := map[uint32]int{}
	var out []Target
	var pathPids []int // the pid of each target's path
	for _, p := range procs {
		ino, err := inode(p)
		if err != nil || !want(ino) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
		t := Target{Name: processName(pid), Path: p, Inode: ino}
		i, ok := byInode[ino]
		if !ok {
			byInode[ino] = len(out)
			out, pathPids = append(out, t), append(pathPids, pid)
			continue
		}
		if better(t.Name, out[i].Name) {
			out[i].Name = t.Name
		}
		// The path is the oldest process's, which lives as long as the
		// namespace (a pod's sandbox), not the named one's, which may be a
		// probe's exec gone a second later with the path.
		if pid < pathPids[i] {
			out[i].Path, pathPids[i] = p, pid
		}
	}
	return out
}

// Processes lists the namespaces the processes are in, each named after
// the process that best tells what lives there.
func Processes() []Target { return processes(func(uint32) bool { return true }) }

// processName is "comm[pid]", as ps and the kernel's own messages name a
// process.
func processName(pid int) string {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "pid:" + strconv.Itoa(pid)
	}
	return strings.TrimSpace(string(comm)) + "[" + strconv.Itoa(pid) + "]"
}

// better says whether process name a tells more of its namespace than b:
// a Kubernetes pod's namespace is held by its sandbox's "pause", which
// names no workload, so any other process wins over it; otherwise the
// lower pid wins (the process that made the namespace, or its oldest
// child), so that a name stays the same while the namespace lives.
func better(a, b string) bool {
	aPause, bPause := strings.HasPrefix(a, "pause["), strings.HasPrefix(b, "pause[")
	if aPause != bPause {
		return bPause
	}
	return pidOf(a) < pidOf(b)
}

func pidOf(name string) int {
	i := strings.LastIndexByte(name, '[')
	if i < 0 {
		_, n, _ := strings.Cut(name, ":")
		pid, _ := strconv.Atoi(n)
		return pid
	}
	pid, _ := strconv.Atoi(strings.TrimSuffix(name[i+1:], "]"))
	return pid
}

// specPath is where a namespace named by NAME or PATH is.
func specPath(spec string) string {
	if !strings.Contains(spec, "/") {
		return filepath.Join(RunDir, spec)
	}
	return spec
}

// nsfsMagic is the file system type of a namespace's file (NSFS_MAGIC),
// as /proc/PID/ns/net and its bind mounts under /run/netns are.
const nsfsMagic = 0x6e736673

// Check says whether a --netns word names a network namespace (self,
// named, all, a NAME under RunDir, or a PATH to a namespace's file),
// without entering it: an empty word, a missing name and a file that is
// no namespace are refused.
func Check(spec string) error {
	switch spec {
	case "self", "named", "all":
		return nil
	case "":
		return fmt.Errorf("empty: want a NAME under %s, a PATH, or all", RunDir)
	}
	p := specPath(spec)
	var fs unix.Statfs_t
	if err := unix.Statfs(p, &fs); err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("no such namespace (%s does not exist)", p)
		}
		return err
	}
	if fs.Type != nsfsMagic {
		return fmt.Errorf("%s is not a network namespace (want a NAME under %s, /proc/PID/ns/net, or a bind mount of one)", p, RunDir)
	}
	return nil
}

// Resolve turns --netns values into namespaces, deduplicated by inode. No
// value means the current namespace and every named one; "all" adds every
// namespace a process is in; anything else is a name under RunDir or a path.
func Resolve(specs []string) ([]Target, error) {
	self, err := current()
	if err != nil {
		return nil, err
	}
	var found []Target
	if len(specs) == 0 {
		specs = []string{"self", "named"}
	}
	for _, s := range specs {
		switch {
		case s == "self":
			found = append(found, self)
		case s == "named":
			found = append(found, Named()...)
		case s == "all":
			found = append(found, self)
			found = append(found, Named()...)
			found = append(found, processes(func(uint32) bool { return true })...)
		default:
			if err := Check(s); err != nil {
				return nil, fmt.Errorf("network namespace %q: %w", s, err)
			}
			p := specPath(s)
			ino, err := inode(p)
			if err != nil {
				return nil, fmt.Errorf("network namespace %q: %w", s, err)
			}
			found = append(found, Target{Name: filepath.Base(s), Path: p, Inode: ino})
		}
	}
	seen := map[uint32]bool{}
	var out []Target
	for _, t := range found {
		if !seen[t.Inode] {
			seen[t.Inode] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// Do runs fn on a thread switched into the namespace at path.
func Do(path string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("get current network namespace: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread is left in the wrong namespace: never reuse it.
		runtime.Goexit()
	}
	return ferr
}

// Namer names namespace inodes and pods' addresses for output, learning
// new namespaces and pods as they appear.
type Namer struct {
	mu    sync.Mutex
	names map[uint32]string
	// provisional are the namespaces named since the run began after their
	// name under /run/netns (a runtime's cni-UUID), a process or their
	// inode: a pod's sandbox exists, with traffic, before its runtime's CNI
	// call writes libcni's cache, and its pod's name, once there, replaces
	// theirs. lastLook is when the cache was last read for them.
	provisional map[uint32]bool
	lastLook    time.Time
	// pods is replaced, never changed: readers take it without the lock.
	pods atomic.Pointer[podTable]
}

// podTable is the pods' addresses (namespace/name) at a generation, which
// changes whenever they do.
type podTable struct {
	gen   uint64
	names map[netip.Addr]string
}

// NewNamer starts with the given targets' names, a pod's name (Pods)
// before its runtime's name for its namespace.
func NewNamer(targets []Target) *Namer {
	n := &Namer{names: map[uint32]string{}, provisional: map[uint32]bool{}}
	n.pods.Store(&podTable{names: map[netip.Addr]string{}})
	n.learnPods()
	n.learn(targets)
	return n
}

// PodAddresses are the pods' addresses (namespace/name) as last learned,
// with a generation that changes when they do. The map is never changed.
func (n *Namer) PodAddresses() (uint64, map[netip.Addr]string) {
	t := n.pods.Load()
	return t.gen, t.names
}

// learnPods names the pods' namespaces that have no name yet, and takes
// the pods' addresses as libcni's cache has them now.
func (n *Namer) learnPods() {
	pods := cniPods()
	for _, t := range podTargets(pods) {
		if n.provisional[t.Inode] {
			n.names[t.Inode] = t.Name
			delete(n.provisional, t.Inode)
		}
	}
	n.learn(podTargets(pods))
	if addrs, old := podAddresses(pods), n.pods.Load(); !maps.Equal(addrs, old.names) {
		n.pods.Store(&podTable{gen: old.gen + 1, names: addrs})
	}
}

// Name returns a namespace's name. An unknown namespace (one made since
// the run began) is looked for among the pods (Pods), under the
// named-namespace directories, then
// among the processes' namespaces (a container's or a CNI's cni-<uuid>,
// which has no useful name, is named by the process in it, "nginx[4121]"),
// and is its inode only when neither has it: it has no process left.
// Whatever it is called the first time, it keeps for the run, but that
// its pod's name replaces these once libcni's cache has the pod (looked
// for at most once a second).
func (n *Namer) Name(ino uint32) string {
	if ino == 0 {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.names[ino]; ok {
		if n.provisional[ino] && time.Since(n.lastLook) > time.Second {
			n.lastLook = time.Now()
			n.learnPods()
			s = n.names[ino]
		}
		return s
	}
	n.learnPods()
	if _, ok := n.names[ino]; !ok {
		n.learnProvisional(Named())
	}
	if _, ok := n.names[ino]; !ok {
		n.learnProvisional(processes(func(ino uint32) bool { _, known := n.names[ino]; return !known }))
	}
	s, ok := n.names[ino]
	if !ok {
		s = fmt.Sprintf("netns:%d", ino)
		n.names[ino] = s
		n.provisional[ino] = true
	}
	return s
}

// learnProvisional names the targets' namespaces that have no name yet,
// until their pods' names come.
func (n *Namer) learnProvisional(targets []Target) {
	for _, t := range targets {
		if _, ok := n.names[t.Inode]; !ok {
			n.names[t.Inode] = t.Name
			n.provisional[t.Inode] = true
		}
	}
}

// learn names the targets' namespaces that have no name yet.
func (n *Namer) learn(targets []Target) {
	for _, t := range targets {
		if _, ok := n.names[t.Inode]; !ok {
			n.names[t.Inode] = t.Name
		}
	}
}
