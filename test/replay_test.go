package test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/output"
	ntrace "github.com/nettrace-dev/nettrace/pkg/trace"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// unprivileged runs nettrace as nobody, as on a machine where the person
// explaining the incident has no root and no BPF.
func unprivileged(args ...string) *exec.Cmd {
	cmd := exec.Command(nettraceBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}

// copyForNobody copies a recording (mode 0600, root's) to a directory
// nobody can read, as if it were carried to another machine.
func copyForNobody(t *testing.T, path string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nettrace-replay")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, dst} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// requireSameReplay replays a recording of a live run, unprivileged, and
// requires the same flows and explanations (compared as JSON); replayed
// with JSON's defaults, the same explanations and the flows with a
// finding whole, the others brief, and no events.
func requireSameReplay(t *testing.T, recording string, live trace) {
	t.Helper()
	st, err := os.Stat(recording)
	if err != nil {
		t.Fatalf("no recording: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("recording mode %v, want 0600", st.Mode().Perm())
	}
	copied := copyForNobody(t, recording)
	whole := replayUnprivileged(t, copied, "--timelines", "all")
	if !reflect.DeepEqual(flowsByID(whole.flows), flowsByID(live.flows)) {
		t.Errorf("replayed flows differ from the live run:\nlive:\n%s\nreplay:\n%s", dump(flowsByID(live.flows)), dump(flowsByID(whole.flows)))
	}
	if !reflect.DeepEqual(explanationsByID(whole.explanations), explanationsByID(live.explanations)) {
		t.Errorf("replayed explanations differ from the live run:\nlive:\n%s\nreplay:\n%s", dump(live.explanations), dump(whole.explanations))
	}

	defaults := replayUnprivileged(t, copied)
	if len(defaults.events) > 0 || !reflect.DeepEqual(explanationsByID(defaults.explanations), explanationsByID(whole.explanations)) {
		t.Errorf("replayed with JSON's defaults: %d events (want none), explanations:\n%s\nwant:\n%s",
			len(defaults.events), dump(defaults.explanations), dump(whole.explanations))
	}
	want := flowsByID(whole.flows)
	for i := range want {
		if want[i].Finding != "" {
			continue
		}
		want[i].Brief, want[i].Socket = true, nil
		for k := range want[i].Packets {
			want[i].Packets[k].Steps = nil
		}
	}
	if got := flowsByID(defaults.flows); !reflect.DeepEqual(got, want) {
		t.Errorf("replayed with JSON's defaults, the flows are not the whole ones with a finding and the others brief:\ngot:\n%s\nwant:\n%s", dump(got), dump(want))
	}
}

// replayUnprivileged replays a recording as nobody with -o json and args.
func replayUnprivileged(t *testing.T, recording string, args ...string) trace {
	t.Helper()
	cmd := unprivileged(append([]string{"replay", recording, "-o", "json"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	tr := parseTrace(t, stdout.Bytes())
	if tr.summary == nil {
		t.Fatalf("replay wrote no summary; stderr:\n%s", stderr.String())
	}
	return tr
}

func flowsByID(fs []output.JSONFlow) []output.JSONFlow {
	out := append([]output.JSONFlow(nil), fs...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func explanationsByID(xs []output.JSONExplanation) []output.JSONExplanation {
	out := append([]output.JSONExplanation(nil), xs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Flow.ID < out[j].Flow.ID })
	return out
}

// The packets of a recording open in tshark, with nettrace's metadata in
// the packet comments.
func TestExportOpensInTshark(t *testing.T) {
	pcapng := exportScenario(t, "snat-missing", "host "+lab.SNATServiceIP)
	out, err := exec.Command("tshark", "-r", pcapng, "-Y", `frame.comment == "drop_reason: IP_RPFILTER"`,
		"-T", "fields", "-e", "frame.interface_name", "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "frame.comment", "-e", "frame.packet_id").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("tshark found no packet commented with the rp_filter drop")
	}
	f := strings.Split(lines[0], "\t")
	if len(f) < 6 || f[0] != lab.NsNode1+"/eth0" || f[1] != lab.Pod2IP || f[2] != "8080" || f[3] != lab.Node1IP ||
		!strings.Contains(f[4], "point: drop") || !strings.Contains(f[4], "netns: "+lab.NsNode1) {
		t.Fatalf("tshark fields %q, want the SYN-ACK %s:8080 -> %s dropped on %s/eth0 with its comments", f, lab.Pod2IP, lab.Node1IP, lab.NsNode1)
	}
	requireOnePacket(t, pcapng, f[5])
	nat, err := exec.Command("tshark", "-r", pcapng, "-Y", `frame.comment == "nat_after: tcp 172.20.0.1:0 -> 0.0.0.0:0"`).Output()
	if err != nil || len(bytes.TrimSpace(nat)) != 0 {
		t.Errorf("a comment filter matching nothing matched: %s %v", nat, err)
	}
	dnat, _ := exec.Command("tshark", "-r", pcapng, "-Y", `frame.comment contains "nat_before: tcp 172.20.0.1:" && frame.comment contains "-> 10.96.0.10:80"`).Output()
	if len(bytes.TrimSpace(dnat)) == 0 {
		t.Errorf("no packet commented with the DNAT's tuple before translation")
	}
	requireValidIPChecksums(t, pcapng)
}

// A packet's steps after NAT translated it in the middle of its journey
// (a pod's SYN to a load balancer, DNATed at its node's PREROUTING to the
// ingress pod and masqueraded) show the packet as translated, with valid
// IP checksums: the kernel sends the journey's bytes once, as its first
// step saw them, and nettrace translates them for the later steps.
// requireOnePacket requires that the states exported with a packet id are
// more than one, and all of one SYN-ACK: the correlator's packet, which no
// other packet at its recycled skb address shares.
func requireOnePacket(t *testing.T, pcapng, id string) {
	t.Helper()
	out, err := exec.Command("tshark", "-r", pcapng, "-Y", "frame.packet_id == "+id,
		"-T", "fields", "-e", "tcp.srcport", "-e", "tcp.flags", "-e", "tcp.seq_raw").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	states := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(states) < 2 {
		t.Fatalf("packet id %q exported on %d state(s) (%q), want the SYN-ACK's every state", id, len(states), out)
	}
	for _, s := range states {
		if s != states[0] || !strings.HasPrefix(s, "8080\t0x0012\t") {
			t.Fatalf("packet id %q exported on states %q, want one SYN-ACK's", id, states)
		}
	}
}

func TestExportTranslatedSteps(t *testing.T) {
	pcapng := exportScenario(t, "hairpin-healthy", "tcp port 443")
	dnat, err := exec.Command("tshark", "-r", pcapng, "-Y",
		`frame.comment contains "hook: PREROUTING" && frame.comment contains "-> `+lab.LoadBalancerIP+`:443" && frame.comment contains "nat_before: tcp `+lab.Pod1IP+`:"`,
		"-T", "fields", "-e", "ip.dst", "-e", "tcp.dstport").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(dnat)), "\n")
	if lines[0] == "" {
		t.Fatalf("no packet commented with the DNAT of %s:443 at PREROUTING", lab.LoadBalancerIP)
	}
	for _, l := range lines {
		if l != lab.IngressPodIP+"\t443" {
			t.Errorf("a DNAT's step shows its packet to %q, want %s:443", l, lab.IngressPodIP)
		}
	}
	requireValidIPChecksums(t, pcapng)
}

// A packet's steps after the tunnel's receiving end decapsulated it show
// the inner packet, translated where NAT translated it since, with valid
// IP checksums: the kernel sends the outer packet's bytes once, with the
// journey it continues after the decapsulation, and nettrace takes the
// inner packet from inside them. Both ways over the overlay: the SYN to
// the pod on node 2, and its SYN-ACK back to node 1, un-DNATed there.
func TestExportDecapsulatedSteps(t *testing.T) {
	pcapng := exportScenario(t, "snat-missing-healthy", "host "+lab.SNATServiceIP)
	pod := fmt.Sprintf("%s:%d", lab.Pod2IP, lab.PodPort)
	received := `frame.comment == "point: dev" && frame.comment == "kind: rx" && `
	for _, c := range []struct {
		what, filter, fields, want string
	}{
		{"the SYN decapsulated on node 2", received + `frame.interface_name == "` + lab.NsNode2 + `/flannel.1" && tcp.flags.syn == 1 && tcp.flags.ack == 0`,
			"ip.dst,tcp.dstport", pod},
		{"the SYN-ACK decapsulated on node 1", received + `frame.interface_name == "` + lab.NsNode1 + `/flannel.1" && tcp.flags.syn == 1 && tcp.flags.ack == 1`,
			"ip.src,tcp.srcport", pod},
		{"the SYN-ACK un-DNATed on node 1", `frame.comment contains "netns: ` + lab.NsNode1 + `" && frame.comment contains "hook: INPUT" && tcp.flags.syn == 1 && tcp.flags.ack == 1`,
			"ip.src,tcp.srcport", lab.SNATServiceIP + ":80"},
	} {
		args := []string{"-r", pcapng, "-Y", c.filter, "-T", "fields", "-E", "separator=:"}
		for _, f := range strings.Split(c.fields, ",") {
			args = append(args, "-e", f)
		}
		out, err := exec.Command("tshark", args...).Output()
		if err != nil {
			t.Fatalf("tshark: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if lines[0] == "" {
			t.Errorf("no packet of %s (%s)", c.what, c.filter)
			continue
		}
		for _, l := range lines {
			if l != c.want {
				t.Errorf("%s shows %q, want %s", c.what, l, c.want)
			}
		}
	}
	requireValidIPChecksums(t, pcapng)
}

// exportScenario records a scenario's traffic on every lab namespace with
// filter, exports the recording as an unprivileged user would, and
// returns the pcapng's path.
func exportScenario(t *testing.T, scenario, filter string) string {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Fatal("tshark is not installed (make deps installs it)")
	}
	if _, err := lab.Up(scenario, labBin); err != nil {
		lab.Down()
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Down() })
	recording := filepath.Join(t.TempDir(), "lab.ntrace")
	args := []string{"-w", recording}
	for _, ns := range lab.Namespaces() {
		args = append(args, "--netns", ns)
	}
	w := startWatch(t, append(args, filter)...)
	sc, _ := lab.Lookup(scenario)
	if _, err := lab.Traffic(sc); err != nil {
		t.Fatal(err)
	}
	w.stop(t)
	copied := copyForNobody(t, recording)
	pcapng := filepath.Join(filepath.Dir(copied), "lab.pcapng")
	if out, err := unprivileged("export", "--pcapng", pcapng, copied).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	return pcapng
}

// requireValidIPChecksums fails when a packet's IP header checksum is
// wrong: every packet's bytes are the kernel's, or the kernel's translated
// as NAT translated them.
func requireValidIPChecksums(t *testing.T, pcapng string) {
	t.Helper()
	out, err := exec.Command("tshark", "-r", pcapng, "-o", "ip.check_checksum:TRUE", "-T", "fields", "-e", "ip.checksum.status").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	// An ICMP error's quoted header has a status of its own: "1,1".
	status := strings.FieldsFunc(string(out), func(r rune) bool { return r == ',' || r == '\n' })
	good := 0
	for _, s := range status {
		if s == "1" {
			good++
		}
	}
	if len(status) == 0 || good != len(status) {
		t.Errorf("%d of %d packets have a good IP header checksum", good, len(status))
	}
}

// Bad input gets one line naming the file and the offset, and exit code 3:
// a recording cut off, corrupt or not one (what was replayed, if anything,
// is partial).
func TestReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ntrace")
	ns := newNetns(t, "rec")
	w := startWatch(t, "-w", good, "--netns", ns, "host 127.0.0.1")
	inNetns(t, ns, func() error {
		dial(t, ns, "", "127.0.0.1:9", 0)
		return nil
	})
	w.stop(t)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o600)
		return p
	}
	pcap := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0}
	newer := append([]byte(nil), data...)
	newer[8] = ntrace.Version + 1
	tests := []struct {
		name, path, want string
		code             int
	}{
		{"truncated", write("cut.ntrace", data[:len(data)-7]), "ends inside a record", 3},
		{"newer version", write("newer.ntrace", newer), fmt.Sprintf("offset 8: format version %d is newer", ntrace.Version+1), 3},
		{"random bytes", write("random.ntrace", []byte("random bytes, not a recording at all")), "offset 0: not a nettrace recording", 3},
		{"tcpdump pcap", write("dump.pcap", pcap), "offset 0: this is a pcap capture", 3},
		{"empty", write("empty.ntrace", nil), "offset 0: empty file", 3},
	}
	for _, tt := range tests {
		cmd := exec.Command(nettraceBin, "replay", tt.path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		msg := strings.TrimSpace(stderr.String())
		last := msg[strings.LastIndex(msg, "\n")+1:]
		if code != tt.code || !strings.Contains(last, tt.path+": offset ") || !strings.Contains(last, tt.want) {
			t.Errorf("%s: exit %d, last line %q; want exit %d and %q with the file and offset", tt.name, code, last, tt.code, tt.want)
		}
		if strings.Contains(msg, "goroutine") || strings.Contains(msg, "panic") {
			t.Errorf("%s: stack trace:\n%s", tt.name, msg)
		}
	}
}
