// Package test holds nettrace's integration tests: the real binary, real
// BPF programs on the running kernel, real namespaces, iptables rules and
// packets. They need root; every test removes what it created, also when
// it fails.
package test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/cluster"
	"github.com/nettrace-dev/nettrace/test/lab"
)

var nettraceBin, labBin string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		// Loud, and a failure under CI: a suite that did not run must
		// never pass for one that did.
		fmt.Fprintln(os.Stderr, "\n*** INTEGRATION TESTS NOT RUN: they need root (real BPF programs, namespaces, iptables rules). Run them as root. ***")
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			fmt.Fprintln(os.Stderr, "*** CI is set: failing. ***")
			os.Exit(1)
		}
		os.Exit(0)
	}
	// In the VM (scripts/vmtest) the binaries come prebuilt: no toolchain.
	nettraceBin, labBin = os.Getenv("NETTRACE_BIN"), os.Getenv("NTLAB_BIN")
	dir := ""
	if nettraceBin == "" || labBin == "" {
		var err error
		if dir, err = os.MkdirTemp("", "nettrace-test"); err != nil {
			panic(err)
		}
		// Replay tests run nettrace as nobody.
		if err := os.Chmod(dir, 0o755); err != nil {
			panic(err)
		}
		nettraceBin = filepath.Join(dir, "nettrace")
		labBin = filepath.Join(dir, "ntlab")
		for bin, pkg := range map[string]string{nettraceBin: "../cmd/nettrace", labBin: "./lab/ntlab"} {
			build := exec.Command("go", "build", "-o", bin, pkg)
			if bin == labBin {
				// Static: the cluster lab's pods run ntlab from an image.
				build.Env = append(os.Environ(), "CGO_ENABLED=0")
			}
			build.Stdout, build.Stderr = os.Stdout, os.Stderr
			if err := build.Run(); err != nil {
				fmt.Println("build", pkg+":", err)
				os.Exit(1)
			}
		}
	}
	code := m.Run()
	// Tests bring a lab scenario up and leave it for the next one, which
	// replaces it: the last one's namespaces, servers and rules go here,
	// whether the tests passed or not.
	if err := lab.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "lab down:", err)
		code = 1
	}
	// Each cluster test removes its cluster; this is for one that could
	// not (a panic). Only when this run brought one up: another run's
	// cluster is not this one's to remove.
	if clusterUsed {
		if err := cluster.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster down:", err)
			code = 1
		}
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// sh runs a command and fails the test on error.
func sh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// script runs command lines (words, no shell syntax) in order and fails on
// the first error. No shell: busybox's (in the VM) would run its own ip.
func script(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		sh(t, strings.Fields(l)...)
	}
}

// newNetns creates a namespace with a unique name, removed at cleanup.
func newNetns(t *testing.T, role string) string {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	name := "ntt-" + role + "-" + hex.EncodeToString(b)
	sh(t, "ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	sh(t, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

// inNetns runs fn on a thread inside the namespace: sockets created there
// stay in it.
func inNetns(t *testing.T, ns string, fn func() error) {
	t.Helper()
	path := ns
	if !filepath.IsAbs(ns) {
		path = filepath.Join(netns.RunDir, ns)
	}
	if err := netns.Do(path, fn); err != nil {
		t.Fatalf("in netns %s: %v", ns, err)
	}
}

// veth links two namespaces with a /24 between them.
func veth(t *testing.T, a, aIf, aAddr, b, bIf, bAddr string) {
	t.Helper()
	script(t,
		fmt.Sprintf("ip link add %s netns %s type veth peer name %s netns %s", aIf, a, bIf, b),
		fmt.Sprintf("ip -n %s addr add %s dev %s", a, aAddr, aIf),
		fmt.Sprintf("ip -n %s addr add %s dev %s", b, bAddr, bIf),
		fmt.Sprintf("ip -n %s link set %s up", a, aIf),
		fmt.Sprintf("ip -n %s link set %s up", b, bIf),
	)
	waitOperUp(t, a, aIf)
	waitOperUp(t, b, bIf)
}

// waitOperUp waits until a link is operationally up. Until the kernel's
// link watch has run (up to a second after the link came up, when other
// links changed just before), the link drops what it sends and a
// neighbour change flushes what waits for resolution: a first IPv6
// connection then loses its SYN and retransmits it a second later.
func waitOperUp(t *testing.T, ns, dev string) {
	t.Helper()
	for deadline := time.Now().Add(lab.Patience); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(sh(t, "ip", "-n", ns, "-o", "link", "show", "dev", dev), "state UP") {
			return
		}
	}
	t.Fatalf("%s/%s not operationally up after %s", ns, dev, lab.Patience)
}

// listen opens a TCP listener in a namespace with an explicit backlog,
// closed at cleanup. accept=false leaves connections in the accept queue.
func listen(t *testing.T, ns, addr string, backlog int, accept bool) {
	t.Helper()
	var ln net.Listener
	inNetns(t, ns, func() error {
		var err error
		if backlog > 0 {
			ln, err = lab.ListenBacklog(addr, backlog)
		} else {
			ln, err = net.Listen("tcp", addr) // the address's family
		}
		return err
	})
	t.Cleanup(func() { ln.Close() })
	if accept {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("ok\n"))
				c.Close()
			}
		}()
	}
}

// dial connects from a namespace and returns what the client saw.
func dial(t *testing.T, ns, laddr, raddr string, timeout time.Duration) error {
	t.Helper()
	var err error
	inNetns(t, ns, func() error {
		d := net.Dialer{Timeout: timeout}
		if laddr != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(laddr)}
		}
		var c net.Conn
		c, err = d.Dial("tcp", raddr) // the address's family
		if err == nil {
			c.Close()
		}
		return nil
	})
	return err
}

// watch is a running `nettrace watch -o json --events --timelines all`:
// everything it saw.
type watch struct {
	cmd    *exec.Cmd
	stdout syncBuffer // read while watch writes it (await)
	stderr syncBuffer
	forced map[string]string // the methods forced per point (--method)
}

// startWatch starts nettrace watch and waits until it is attached.
func startWatch(t *testing.T, args ...string) *watch {
	t.Helper()
	return startWatchWith(t, nil, args...)
}

// startWatchWith starts nettrace watch as launcher runs it (the built
// binary when nil): launcher's words come before watch's arguments.
func startWatchWith(t *testing.T, launcher []string, args ...string) *watch {
	t.Helper()
	if launcher == nil {
		launcher = []string{nettraceBin}
	}
	ready := filepath.Join(t.TempDir(), "ready")
	w := &watch{forced: map[string]string{}}
	for i, a := range args {
		if a == "--method" && i+1 < len(args) {
			point, method, _ := strings.Cut(args[i+1], "=")
			w.forced[point] = method
		}
	}
	// --duration stops a watch the test never stopped (it hung), not one
	// a slow machine keeps running. The lab's pods are named from its own
	// libcni cache; a test's --cni-cache comes later and wins.
	full := append([]string{"watch", "-o", "json", "--events", "--timelines", "all", "--ready-file", ready, "--duration", lab.Patience.String(),
		"--log-level", "debug", "--log-format", "json", "--cni-cache", lab.CNIResults}, args...)
	w.cmd = exec.Command(launcher[0], append(launcher[1:], full...)...)
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start nettrace: %v", err)
	}
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	})
	// Attaching takes seconds on a quiet machine and tens of seconds in a
	// TCG guest under load: the bound only catches a hang.
	deadline := time.Now().Add(lab.Patience)
	for {
		if _, err := os.Stat(ready); err == nil {
			return w
		}
		if exited(w.cmd.Process.Pid) {
			t.Fatalf("nettrace exited before it was ready; stderr:\n%s", w.stderr.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("nettrace not ready after %s; stderr:\n%s", lab.Patience, w.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited says whether a child process has exited and waits to be reaped (a
// zombie), without reaping it: the test's own Wait still collects it.
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command's name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// syncBuffer is an output written by one goroutine and read by another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) snapshot() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *syncBuffer) Bytes() []byte  { return s.snapshot() }
func (s *syncBuffer) String() string { return string(s.snapshot()) }

// await waits until watch has written n events pred accepts: what a test
// asserts after the traffic, rather than a fixed time that a slow machine
// may overrun. Events reach the output within a tick of being read.
func (w *watch) await(t *testing.T, what string, n int, pred func(e output.JSONEvent) bool) {
	t.Helper()
	for deadline := time.Now().Add(lab.Patience); ; time.Sleep(20 * time.Millisecond) {
		seen := w.count(pred)
		if seen >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d %s after %s; stderr:\n%s", seen, n, what, lab.Patience, w.stderr.String())
		}
	}
}

// count is how many events watch has written that pred accepts.
func (w *watch) count(pred func(e output.JSONEvent) bool) int {
	seen := 0
	for _, line := range bytes.Split(w.stdout.snapshot(), []byte("\n")) {
		var e output.JSONEvent
		if bytes.HasPrefix(line, []byte(`{"type":"event"`)) && json.Unmarshal(line, &e) == nil && pred(e) {
			seen++
		}
	}
	return seen
}

// trace is what one watch printed.
type trace struct {
	events       []output.JSONEvent
	flows        []output.JSONFlow
	explanations []output.JSONExplanation
	summary      map[string]any
	attached     map[string]attachment // how each point attached (watch)
	warnings     []string              // watch's warnings (logWarnings)
}

// stop interrupts watch and returns what it printed.
func (w *watch) stop(t *testing.T) trace {
	t.Helper()
	w.cmd.Process.Signal(syscall.SIGINT)
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("nettrace watch: %v\nstderr:\n%s", err, w.stderr.String())
	}
	tr := parseTrace(t, w.stdout.snapshot())
	if tr.summary == nil {
		t.Fatalf("no summary object; stderr:\n%s", w.stderr.String())
	}
	requireBestMethods(t, w.stderr.Bytes(), w.forced)
	tr.warnings = logWarnings(t, w.stderr.Bytes())
	tr.attached = attachedPoints(w.stderr.Bytes())
	return tr
}

// parseTrace reads the JSON lines of a run of watch or replay.
func parseTrace(t *testing.T, out []byte) trace {
	t.Helper()
	var tr trace
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		typ, err := objectType(sc.Bytes())
		if err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		switch typ {
		case "event":
			var e output.JSONEvent
			err = json.Unmarshal(sc.Bytes(), &e)
			tr.events = append(tr.events, e)
		case "flow":
			var f output.JSONFlow
			err = json.Unmarshal(sc.Bytes(), &f)
			tr.flows = append(tr.flows, f)
		case "explanation":
			var x output.JSONExplanation
			err = json.Unmarshal(sc.Bytes(), &x)
			tr.explanations = append(tr.explanations, x)
		case "summary":
			err = json.Unmarshal(sc.Bytes(), &tr.summary)
		default:
			t.Fatalf("unknown object type %q", typ)
		}
		if err != nil {
			t.Fatalf("bad %s object %q: %v", typ, sc.Text(), err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read watch output: %v", err)
	}
	return tr
}

// objectType is a JSON line's "type". nettrace writes it first in every
// object, so the line's start says it without decoding the line twice
// (a busy run's 40 MB: 2.19 s decoded twice, 1.46 s once, here; a TCG
// guest pays many times that). A line that starts otherwise is decoded.
func objectType(line []byte) (string, error) {
	if rest, ok := bytes.CutPrefix(line, []byte(`{"type":"`)); ok {
		if end := bytes.IndexByte(rest, '"'); end > 0 {
			return string(rest[:end]), nil
		}
	}
	var probe struct{ Type string }
	err := json.Unmarshal(line, &probe)
	return probe.Type, err
}

// logWarnings logs watch's warnings (events lost or missed, rules not
// traced), so that a test failing for want of an event says why, and
// returns them.
func logWarnings(t *testing.T, log []byte) []string {
	t.Helper()
	var warnings []string
	for _, line := range bytes.Split(log, []byte("\n")) {
		var l struct{ Level string }
		if json.Unmarshal(line, &l) == nil && l.Level == "warn" {
			t.Logf("nettrace: %s", line)
			warnings = append(warnings, string(line))
		}
	}
	return warnings
}

// requireBestMethods checks, from watch's debug log, that no point fell
// back to a worse method than this kernel allows with the flags used (a
// verifier rejection under one combination of filter and options would
// otherwise pass unnoticed): on a BTF kernel the tracepoint points use
// tp_btf, never the classic tracepoints. A forced point must use the
// method forced.
func requireBestMethods(t *testing.T, log []byte, forced map[string]string) {
	t.Helper()
	attached := map[string]string{}
	for p, a := range attachedPoints(log) {
		attached[p] = a.method
	}
	for p, m := range forced {
		if attached[p] != m {
			t.Errorf("point %s attached with %q, want %q (forced)", p, attached[p], m)
		}
	}
	for _, p := range []string{"drop", "dev", "tcp", "route", "vxlan"} {
		if _, ok := forced[p]; ok {
			continue
		}
		if m := attached[p]; m != "tp_btf" && m != "fentry" && m != "kprobe" {
			t.Errorf("point %s attached with %q, want tp_btf (or fentry/kprobe)", p, m)
		}
	}
	if _, ok := forced["nat"]; ok {
		return
	}
	if m := attached["nat"]; m != "netfilter" && m != "fentry" && m != "kprobe" {
		t.Errorf("point nat attached with %q", m)
	}
}

// attachment is how watch attached a point: its method and targets.
type attachment struct{ method, target string }

// attachedPoints reads from watch's debug log how each point attached.
func attachedPoints(log []byte) map[string]attachment {
	out := map[string]attachment{}
	for _, line := range bytes.Split(log, []byte("\n")) {
		var l struct{ Message, Point, Method, Target string }
		if json.Unmarshal(line, &l) == nil && l.Message == "attached" {
			out[l.Point] = attachment{l.Method, l.Target}
		}
	}
	return out
}

// twinFinding checks a run of a fault or of its healthy twin, whose
// connection attempt returned dialErr: the twin connects and explains
// nothing (ok false: nothing more to check); the fault does not connect
// and gives one finding, of rule, returned.
func twinFinding(t *testing.T, tr trace, dialErr error, fault bool, rule string) (x output.JSONExplanation, ok bool) {
	t.Helper()
	if !fault {
		if dialErr != nil {
			t.Fatalf("the healthy twin did not connect: %v", dialErr)
		}
		if len(tr.explanations) > 0 {
			t.Errorf("findings on the healthy twin: %+v", tr.explanations)
		}
		return x, false
	}
	if dialErr == nil {
		t.Fatal("connected despite the fault")
	}
	if len(tr.explanations) != 1 || tr.explanations[0].Rule != rule {
		t.Fatalf("findings %+v, want %s once (dial: %v)", tr.explanations, rule, dialErr)
	}
	return tr.explanations[0], true
}

// requirePodNamed requires the events of a pod's namespace to name it
// after the pod (pod:NAMESPACE/NAME), none after the runtime's cni-UUID.
func requirePodNamed(t *testing.T, w *watch, name string) trace {
	t.Helper()
	w.await(t, "an event in the pod's namespace", 1, func(e output.JSONEvent) bool { return e.Netns == name })
	tr := w.stop(t)
	for _, e := range tr.events {
		if strings.HasPrefix(e.Netns, "cni-") {
			t.Errorf("an event names the pod's namespace %s, not %s: %+v", e.Netns, name, e)
		}
	}
	return tr
}

// find returns the events that satisfy pred.
func find(events []output.JSONEvent, pred func(e output.JSONEvent) bool) []output.JSONEvent {
	var out []output.JSONEvent
	for _, e := range events {
		if pred(e) {
			out = append(out, e)
		}
	}
	return out
}

// dump renders objects one JSON line each, for failure messages.
func dump[T any](xs []T) string {
	var b strings.Builder
	for _, x := range xs {
		j, _ := json.Marshal(x)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
