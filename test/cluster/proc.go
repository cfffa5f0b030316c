package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nettrace-dev/nettrace/test/lab"
)

// place is where a process runs: a network namespace, and for a node's
// components, the node's mount namespace (the holder's).
type place struct {
	netns  string
	holder int // pid whose mount namespace to enter; 0 for the host's
}

// start runs a component detached from the caller (a session of its own,
// so that `ntlab cluster up` can return), its output in
// StateDir/logs/NAME.log and its pid in StateDir/pids/NAME.pid.
func start(name string, at place, env []string, argv ...string) (*os.Process, error) {
	for _, d := range []string{"logs", "pids"} {
		if err := os.MkdirAll(filepath.Join(StateDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	log, err := os.OpenFile(logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	// nsenter opens every namespace before it enters one, so the netns
	// path under the host's /run is read before the node's tmpfs hides it.
	args := []string{"--net=" + filepath.Join("/run/netns", at.netns)}
	if at.holder != 0 {
		args = append(args, fmt.Sprintf("--mount=/proc/%d/ns/mnt", at.holder))
	}
	cmd := exec.Command("nsenter", append(append(args, "--"), argv...)...)
	cmd.Env = append(append(os.Environ(), marker), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(StateDir, "pids", name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return nil, err
	}
	go cmd.Wait() // reaped here while the caller lives; init's after
	return cmd.Process, nil
}

// alive tells whether the component name still runs.
func alive(name string) bool {
	b, err := os.ReadFile(filepath.Join(StateDir, "pids", name+".pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && syscall.Kill(pid, 0) == nil
}

func logPath(name string) string { return filepath.Join(StateDir, "logs", name+".log") }

// LogTail is the end of a component's log, for an error that names it.
func LogTail(name string, lines int) string {
	b, _ := os.ReadFile(logPath(name))
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// errExited is what ok's error wraps when the awaited component exited:
// waiting longer is pointless.
var errExited = errors.New("exited")

// exited is ok's error when component name exited, with its log's end.
func exited(name string) error {
	return fmt.Errorf("%s %w: %s", name, errExited, LogTail(name, 10))
}

// waitFor polls ok until it holds or Patience passes; the error says what
// was awaited and ok's last complaint.
func waitFor(what string, ok func() error) error {
	var last error
	for deadline := time.Now().Add(Patience); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last = ok(); last == nil {
			return nil
		}
		if errors.Is(last, errExited) {
			return fmt.Errorf("%s: %w", what, last)
		}
	}
	return fmt.Errorf("%s: not within %s: %w", what, Patience, last)
}

// killAll kills every process the cluster started or that runs in one of
// its network namespaces (pods with the host's network among them), until
// none is left: a killed containerd's shims, say, are found on the next
// pass.
func killAll() error {
	pidFiles, _ := filepath.Glob(filepath.Join(StateDir, "pids", "*.pid"))
	for _, f := range pidFiles {
		if b, err := os.ReadFile(f); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && ours(pid, nil) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	inodes := clusterNetnsInodes()
	var left []int
	for pass := 0; pass < 50; pass++ {
		left = left[:0]
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() || !ours(pid, inodes) {
				continue
			}
			syscall.Kill(pid, syscall.SIGKILL)
			left = append(left, pid)
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes still running after SIGKILL: %v", left)
}

// ours tells whether pid is the cluster's: it carries the marker in its
// environment, or it runs in one of the cluster's network namespaces.
func ours(pid int, netnsInodes map[uint64]bool) bool {
	var st syscall.Stat_t
	if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && netnsInodes[st.Ino] {
		return true
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+marker+"\x00"))
}

// clusterNetnsInodes are the inodes of the cluster's network namespaces.
func clusterNetnsInodes() map[uint64]bool {
	out := map[uint64]bool{}
	for _, ns := range Namespaces() {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/run/netns", ns), &st) == nil {
			out[st.Ino] = true
		}
	}
	return out
}

// Namespaces lists the cluster's network namespaces that exist now.
func Namespaces() []string { return lab.NamespacesNamed(Prefix) }

// Down removes the cluster: its processes (components, shims, pods), the
// pods' cgroups, its namespaces (their devices, rules and routes with
// them, the host's veth too) and StateDir, and puts back the kernel
// settings Up changed. It is safe to run when nothing is up.
func Down() error {
	var errs []error
	if err := killAll(); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	// The host's end of the API server's link first: a veth whose peer's
	// namespace is deleted goes with it, but only once the kernel's
	// namespace cleanup gets to it, which a busy machine delays.
	if exec.Command("ip", "link", "show", hostAPILink).Run() == nil {
		if out, err := exec.Command("ip", "link", "del", hostAPILink).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", hostAPILink, err, bytes.TrimSpace(out)))
		}
	}
	for _, ns := range Namespaces() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", ns, err, bytes.TrimSpace(out)))
		}
	}
	if err := os.RemoveAll(StateDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
