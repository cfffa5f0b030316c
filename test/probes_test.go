package test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/nettrace-dev/nettrace/internal/probe"
	"github.com/nettrace-dev/nettrace/test/lab"
)

type probesReport struct {
	Kernel struct {
		Release  string
		BTF      bool
		Lockdown string
		Kprobes  bool
	}
	Points []probe.Status
}

// byPoint returns the report's points by name.
func (r probesReport) byPoint() map[string]probe.Status {
	points := map[string]probe.Status{}
	for _, s := range r.Points {
		points[s.Point] = s
	}
	return points
}

// runProbes reports the points' methods, with the methods forced by args
// (--method point=method).
func runProbes(t *testing.T, args ...string) probesReport {
	t.Helper()
	out, err := exec.Command(nettraceBin, append([]string{"probes", "--json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("nettrace probes %s: %v", strings.Join(args, " "), err)
	}
	var r probesReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("probes JSON: %v\n%s", err, out)
	}
	return r
}

func skipReason(s probe.Status, m probe.Method) string {
	for _, a := range s.Skipped {
		if a.Method == m {
			return a.Reason
		}
	}
	return ""
}

// The mission's kernel functions are probed where kprobes or fentry work;
// elsewhere the report names why and the fallback in use. The expectation
// is derived from what this kernel offers, so the same test holds on the
// CI host (no kprobes, lockdown) and in the VM kernels.
func TestProbesReportMethodsAndReasons(t *testing.T) {
	r := runProbes(t)
	points := r.byPoint()
	for _, name := range probe.PointNames() {
		if _, ok := points[name]; !ok {
			t.Errorf("point %s missing from the report", name)
		}
	}
	fentryWorks := r.Kernel.Lockdown == "none"
	mission := map[string]probe.Method{"nat": probe.MethodNetfilter, "route": probe.MethodTpBTF, "vxlan": probe.MethodTpBTF, "syn": probe.MethodTpBTF}
	for name, fallback := range mission {
		s := points[name]
		switch {
		case fentryWorks || r.Kernel.Kprobes:
			if s.Method != probe.MethodFentry && s.Method != probe.MethodKprobe {
				t.Errorf("%s: method %s on a kernel with fentry=%v kprobes=%v; skipped: %+v", name, s.Method, fentryWorks, r.Kernel.Kprobes, s.Skipped)
			}
		default:
			if s.Method != fallback {
				t.Errorf("%s: method %q, want the fallback %s; skipped: %+v", name, s.Method, fallback, s.Skipped)
			}
			if got := skipReason(s, probe.MethodKprobe); !strings.Contains(got, "kprobes not built into this kernel") {
				t.Errorf("%s: kprobe reason %q", name, got)
			}
			if got := skipReason(s, probe.MethodFentry); !strings.Contains(got, "fentry refused: lockdown="+r.Kernel.Lockdown) {
				t.Errorf("%s: fentry reason %q", name, got)
			}
		}
	}
	// Where trampolines attach to no kernel function (arm64's 6.1), every
	// point that has fentry says so, from one trial; where they work but
	// cannot take udp_tunnel_xmit_skb's arguments (x86 before 6.6, arm64),
	// the vxlan point says so, from a trial before it loads its object.
	const noTrampolines = "trampolines do not attach to kernel functions"
	trampolinesRefused := strings.Contains(skipReason(points["nat"], probe.MethodFentry), noTrampolines)
	if trampolinesRefused {
		for _, name := range []string{"route", "vxlan", "syn"} {
			if got := skipReason(points[name], probe.MethodFentry); !strings.Contains(got, noTrampolines) {
				t.Errorf("%s: fentry reason %q on a kernel whose trampolines the nat point found attach nowhere", name, got)
			}
		}
	}
	if s := points["vxlan"]; fentryWorks && !trampolinesRefused && s.Method != probe.MethodFentry {
		if got := skipReason(s, probe.MethodFentry); !strings.Contains(got, "trampolines cannot take udp_tunnel_xmit_skb's arguments") {
			t.Errorf("vxlan: method %s on a kernel with fentry; fentry reason %q", s.Method, got)
		}
	}
	if s := points["nat"]; s.Method == probe.MethodFentry || s.Method == probe.MethodKprobe {
		if s.Target != "nf_nat_ipv4_fn" && !strings.Contains(s.Note, "inlined here; using "+s.Target) {
			t.Errorf("nat target %q without naming the inlined function: %q", s.Target, s.Note)
		}
	}
	for _, name := range []string{"drop", "dev", "tcp"} {
		if m := points[name].Method; m != probe.MethodTpBTF {
			t.Errorf("%s: method %q, want tp_btf on a BTF kernel", name, m)
		}
	}
}

// The FIB lookup tracepoint tells which packet a lookup re-routes only
// inside the window of the nat point's netfilter programs: with NAT
// observed otherwise the route point refuses it and says why, rather than
// attach a method that reports no re-route.
func TestProbesRouteLookupsNeedNetfilterNAT(t *testing.T) {
	for _, nat := range []probe.Method{probe.MethodFentry, probe.MethodNetfilter} {
		points := runProbes(t, "--method", "route=tp_btf", "--method", "nat="+string(nat)).byPoint()
		route, reason := points["route"].Method, skipReason(points["route"], probe.MethodTpBTF)
		switch {
		case points["nat"].Method != probe.MethodNetfilter && route == probe.MethodTpBTF:
			t.Errorf("nat=%s: route attached tp_btf beside nat's %q", nat, points["nat"].Method)
		case points["nat"].Method != probe.MethodNetfilter && !strings.Contains(reason, "nat point's netfilter programs"):
			t.Errorf("nat=%s: route's tp_btf refused for %q, want the nat point's netfilter programs named", nat, reason)
		case points["nat"].Method == probe.MethodNetfilter && route != probe.MethodTpBTF:
			t.Errorf("nat=netfilter: route method %q, want tp_btf; skipped: %+v", route, points["route"].Skipped)
		}
	}
}

// ourPrograms counts loaded BPF programs with nettrace's names.
func ourPrograms(t *testing.T) int {
	t.Helper()
	names := map[string]bool{}
	for _, n := range probe.ProgramNames() {
		names[n] = true
	}
	count := 0
	id := ebpf.ProgramID(0)
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, syscall.ENOENT) {
			return count
		}
		if err != nil {
			t.Fatalf("list BPF programs: %v", err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // freed meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err == nil && names[info.Name] {
			count++
		}
	}
}

// SIGKILL gives the tracer no chance to clean up: everything it attached
// must go with its file descriptors.
func TestNoResidueAfterSIGKILL(t *testing.T) {
	// Programs of earlier runs are freed asynchronously after their exit.
	waitNoPrograms(t, "before the test")
	ns := newNetns(t, "kill")
	recording := filepath.Join(t.TempDir(), "killed.ntrace")
	w := startWatch(t, "-w", recording, "--netns", ns, "port 1")
	if n := ourPrograms(t); n == 0 {
		t.Fatal("no nettrace program loaded while watch runs")
	}
	dial(t, ns, "", "127.0.0.1:1", time.Second)
	// The recording is flushed on a clock: kill once it holds the flow.
	waitReplayable(t, recording)
	w.cmd.Process.Kill()
	w.cmd.Wait()
	waitNoPrograms(t, "after SIGKILL")

	// The recording of the killed run replays up to where it stopped.
	out, err := exec.Command(nettraceBin, "replay", recording, "-o", "json").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "no closing summary") ||
		!strings.Contains(string(out), `"type":"flow"`) {
		t.Fatalf("replay of a killed recording: %v\n%s", err, out)
	}
}

// waitReplayable waits until a recording being written replays a flow.
func waitReplayable(t *testing.T, recording string) {
	t.Helper()
	for deadline := time.Now().Add(lab.Patience); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, _ := exec.Command(nettraceBin, "replay", recording, "-o", "json").Output()
		if strings.Contains(string(out), `"type":"flow"`) {
			return
		}
	}
	t.Fatalf("%s replays no flow after %s", recording, lab.Patience)
}

func waitNoPrograms(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(lab.Patience)
	for {
		n := ourPrograms(t)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d nettrace programs still loaded %s %s", n, lab.Patience, when)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
