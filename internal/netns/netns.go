// Package netns finds the network namespaces nettrace watches, names them
// for output, and runs code inside one (BPF netfilter links and sock_diag
// queries belong to the namespace of the calling thread).
package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netns"
)

// RunDir is where iproute2 and CNI plugins bind-mount named namespaces.
const RunDir = "/run/netns"

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

// Named lists the namespaces under RunDir.
func Named() []Target {
	entries, err := os.ReadDir(RunDir)
	if err != nil {
		return nil
	}
	var out []Target
	for _, e := range entries {
		p := filepath.Join(RunDir, e.Name())
		if ino, err := inode(p); err == nil {
			out = append(out, Target{Name: e.Name(), Path: p, Inode: ino})
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
	return Target{Name: selfName(ino), Path: "/proc/self/ns/net", Inode: ino}, nil
}

func processes() []Target {
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	var out []Target
	for _, p := range procs {
		if ino, err := inode(p); err == nil {
			pid := strings.Split(p, "/")[2]
			out = append(out, Target{Name: "pid:" + pid, Path: p, Inode: ino})
		}
	}
	return out
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
			found = append(found, processes()...)
		default:
			p := s
			if !strings.Contains(s, "/") {
				p = filepath.Join(RunDir, s)
			}
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

// Namer names namespace inodes for output, learning new namespaces as they
// appear.
type Namer struct {
	mu    sync.Mutex
	names map[uint32]string
}

// NewNamer starts with the given targets' names.
func NewNamer(targets []Target) *Namer {
	n := &Namer{names: map[uint32]string{}}
	for _, t := range targets {
		n.names[t.Inode] = t.Name
	}
	return n
}

// Name returns a namespace's name, rescanning RunDir once for an unknown one.
func (n *Namer) Name(ino uint32) string {
	if ino == 0 {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.names[ino]; ok {
		return s
	}
	for _, t := range Named() {
		if _, ok := n.names[t.Inode]; !ok {
			n.names[t.Inode] = t.Name
		}
	}
	s, ok := n.names[ino]
	if !ok {
		s = fmt.Sprintf("netns:%d", ino)
		n.names[ino] = s
	}
	return s
}
