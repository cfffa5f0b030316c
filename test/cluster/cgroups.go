package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMount is where this machine mounts its cgroup hierarchies (v1, one
// directory a controller).
const cgroupMount = "/sys/fs/cgroup"

// cgroupRoot is the cgroup under which a node's kubelet puts its pods
// (kubelet's cgroupRoot): one a node, so that the two kubelets' QoS
// hierarchies do not meet, and Down knows what to remove.
func (n Node) cgroupRoot() string { return "/" + Prefix + n.Name }

// makeCgroupRoot makes the node's cgroup in every v1 hierarchy. cpuset's
// new cgroups start with no CPUs and no memory nodes, which no task may
// join: it gets its parent's, as the kubelet expects of its root.
func makeCgroupRoot(n Node) error {
	for _, h := range hierarchies() {
		dir := filepath.Join(h, n.cgroupRoot())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// hierarchies lists the mounted cgroup hierarchies (v1 controllers, and
// the unified one where mounted beside them).
func hierarchies() []string {
	entries, _ := os.ReadDir(cgroupMount)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(cgroupMount, e.Name()))
		}
	}
	return out
}

// removeCgroups kills what is left in the nodes' cgroups and removes them,
// deepest first (a cgroup is removed only empty of tasks and children).
func removeCgroups() error {
	var errs []error
	for _, h := range hierarchies() {
		for _, n := range AllNodes() {
			root := filepath.Join(h, n.cgroupRoot())
			if _, err := os.Stat(root); err != nil {
				continue
			}
			if err := removeCgroupTree(root); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func removeCgroupTree(root string) error {
	var dirs []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.Reverse(dirs)
	for _, d := range dirs {
		err := waitFor("cgroup "+d+" removed", func() error {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				time.Sleep(50 * time.Millisecond)
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
