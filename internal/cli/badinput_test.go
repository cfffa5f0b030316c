package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// The tests run this test binary as nettrace: with runAsNettrace set it is
// nettrace's main.
const runAsNettrace = "NETTRACE_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsNettrace) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// ran is what one nettrace command did.
type ran struct {
	code           int
	stdout, stderr string
}

// firstLine is the first line of what the command said on stderr.
func (r ran) firstLine() string {
	line, _, _ := strings.Cut(strings.TrimSpace(r.stderr), "\n")
	return line
}

// nettrace runs the command line in dir, standard input from stdin (nil:
// none), and returns what it did. A command that should fail before it
// attaches anything but does not is stopped after a while, and fails the
// test by its exit code.
func nettrace(t *testing.T, dir string, stdin []byte, args ...string) ran {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), runAsNettrace+"=1")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := ran{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run nettrace %v: %v", args, err)
	}
	return r
}

// writeRecording records incident 1's events (fixture.SNATMissing), each
// with its packet's bytes, at path, as watch -w would: replay names
// snat-missing-on-tunnel, export writes its packets.
func writeRecording(t *testing.T, path string) []byte {
	t.Helper()
	w, err := trace.Create(path, trace.Meta{Nettrace: "test", Host: "node1", MonoNS: 1, WallNS: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).UnixNano()}, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fixture.SNATMissing(false) {
		fixture.Snapshot(&e, 1, 1000)
		if err := w.Event(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(trace.Summary{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// files lists a directory's files and their contents.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}

// badInput is one command line of a class of bad input: the exit code it
// must give, and the words its first line of diagnostics must hold.
type badInput struct {
	name  string
	args  []string
	code  int
	words string
}

// runClass runs each case in a directory holding good.ntrace (incident
// 1), other.ntrace (another recording) and out.pcapng (an earlier
// export), and requires its exit code and first line, one line of
// diagnostics without a stack, and every file as it was with nothing
// beside it.
func runClass(t *testing.T, cases []badInput) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRecording(t, filepath.Join(dir, "good.ntrace"))
			writeRecording(t, filepath.Join(dir, "other.ntrace"))
			os.WriteFile(filepath.Join(dir, "out.pcapng"), []byte("an earlier export"), 0o600)
			before := files(t, dir)
			r := nettrace(t, dir, nil, tc.args...)
			if r.code != tc.code || !strings.Contains(r.firstLine(), tc.words) {
				t.Errorf("nettrace %s: exit %d, first line %q; want exit %d and %q", strings.Join(tc.args, " "), r.code, r.firstLine(), tc.code, tc.words)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("nettrace %s: a stack trace:\n%s", strings.Join(tc.args, " "), r.stderr)
			}
			after := files(t, dir)
			for name, content := range before {
				if after[name] != content {
					t.Errorf("nettrace %s changed %s (%d bytes, was %d)", strings.Join(tc.args, " "), name, len(after[name]), len(content))
				}
			}
			for name := range after {
				if _, ok := before[name]; !ok {
					t.Errorf("nettrace %s left %s behind", strings.Join(tc.args, " "), name)
				}
			}
		})
	}
}

// Outputs are never written in place: an output that is an input, or a
// recording, is refused before anything is opened for writing, and a
// failed export leaves every file as it was and nothing beside it.
func TestBadInputLosesNoData(t *testing.T) {
	runClass(t, []badInput{
		{"arguments in cp's order", []string{"export", "--pcapng", "good.ntrace", "new.pcapng"}, exitUsage, "new.pcapng: no such recording"},
		{"the output is the input", []string{"export", "--pcapng", "good.ntrace", "good.ntrace"}, exitUsage, "--pcapng good.ntrace is also a recording to read"},
		{"the output is another recording", []string{"export", "--pcapng", "other.ntrace", "good.ntrace"}, exitUsage, "--pcapng other.ntrace is a nettrace recording"},
		{"the output's directory is missing", []string{"export", "--pcapng", "gone/new.pcapng", "good.ntrace"}, exitFailure, "create gone/new.pcapng"},
		{"an input is not a recording", []string{"export", "--pcapng", "out.pcapng", "out.pcapng.txt"}, exitUsage, "out.pcapng.txt: no such recording"},
		{"an input is a directory", []string{"export", "--pcapng", "new.pcapng", "."}, exitUsage, ". is a directory"},
	})
}

// Every flag is checked before anything is read or attached; the error
// names the flag and what it takes.
func TestBadInputFlagsInRange(t *testing.T) {
	runClass(t, []badInput{
		{"replay --max-packets -1", []string{"replay", "--max-packets", "-1", "good.ntrace"}, exitUsage, "--max-packets -1: want at least 1"},
		{"replay --max-flows -1", []string{"replay", "--max-flows", "-1", "good.ntrace"}, exitUsage, "--max-flows -1: want at least 1"},
		{"replay --max-flows 0", []string{"replay", "--max-flows", "0", "good.ntrace"}, exitUsage, "--max-flows 0: want at least 1"},
		{"replay --flow-timeout -1s", []string{"replay", "--flow-timeout", "-1s", "good.ntrace"}, exitUsage, "--flow-timeout -1s: want a duration above zero"},
		{"watch --duration -5s", []string{"watch", "--duration", "-5s"}, exitUsage, "--duration -5s: want zero or more"},
		{"record --flight-before -10s", []string{"record", "--flight", ".", "--flight-before", "-10s"}, exitUsage, "--flight-before -10s: want zero or more"},
		{"record --keep -3", []string{"record", "--flight", ".", "--keep", "-3"}, exitUsage, "--keep -3: want zero (all) or more"},
		{"record --files -2", []string{"record", "-w", "new.ntrace", "--files", "-2"}, exitUsage, "--files -2: want zero (all) or more"},
		{"watch --max-packets 0", []string{"watch", "--max-packets", "0"}, exitUsage, "--max-packets 0: want at least 1"},
		{"watch --method nat=bogus", []string{"watch", "--method", "nat=bogus"}, exitUsage, `point nat has no method "bogus"; its methods: fentry, kprobe, netfilter`},
		{"watch --method bogus=kprobe", []string{"watch", "--method", "bogus=kprobe"}, exitUsage, "want POINT=METHOD with POINT one of"},
		{`watch --netns ""`, []string{"watch", "--netns", ""}, exitUsage, `--netns "": empty`},
		{"watch --netns /etc/passwd", []string{"watch", "--netns", "/etc/passwd"}, exitUsage, "/etc/passwd is not a network namespace"},
		{"watch --netns a missing name", []string{"watch", "--netns", "nettrace-no-such-namespace"}, exitUsage, "no such namespace"},
		{"watch --ring-size 1000", []string{"watch", "--ring-size", "1000"}, exitUsage, "--ring-size 1000: want a power of two"},
		{"watch --snaplen 100000", []string{"watch", "--snaplen", "100000"}, exitUsage, "--snaplen 100000: at most"},
		{"watch -C 10 without -w", []string{"watch", "-C", "10"}, exitUsage, "--file-size splits a recording: it needs -w FILE"},
		{"watch -o yaml", []string{"watch", "-o", "yaml"}, exitUsage, `-o "yaml": want text, json or html`},
		{"replay -o yaml", []string{"replay", "-o", "yaml", "good.ntrace"}, exitUsage, `-o "yaml": want text, json or html`},
		{"replay -o html --events", []string{"replay", "-o", "html", "--events", "good.ntrace"}, exitUsage, `--events shows events as they come, in text or json; -o html draws the flows at the end`},
		{"record --healthy bogus", []string{"record", "--flight", ".", "--healthy", "bogus"}, exitUsage, `"bogus": want ship or count`},
		{"watch --healthy count with a filter", []string{"watch", "--healthy", "count", "port 80"}, exitUsage, "--healthy count holds connections only with no filter"},
		{"record --held 0", []string{"record", "--flight", ".", "--healthy", "count", "--held", "0"}, exitUsage, "--held 0: want at least 1"},
	})
}

// One exit code table for every command, cobra's errors included.
func TestBadInputExitCodes(t *testing.T) {
	runClass(t, []badInput{
		{"an unknown flag", []string{"replay", "--bogus", "good.ntrace"}, exitUsage, "unknown flag: --bogus"},
		{"a missing argument", []string{"replay"}, exitUsage, "requires at least 1 arg(s)"},
		{"a bad duration", []string{"replay", "--flow-timeout", "soon", "good.ntrace"}, exitUsage, `invalid argument "soon" for "--flow-timeout"`},
		{"a bad --timelines", []string{"replay", "--timelines", "some", "good.ntrace"}, exitUsage, `"some": want brief, findings or all`},
		{"an unknown command", []string{"wtach"}, exitUsage, `unknown command "wtach" for "nettrace"`},
		{"a missing recording", []string{"replay", "gone.ntrace"}, exitUsage, "gone.ntrace: no such recording"},
		{"a mistyped second recording", []string{"replay", "good.ntrace", "goood.ntrace"}, exitUsage, "goood.ntrace: no such recording"},
		{"a filter before the recordings", []string{"replay", "port", "80", "good.ntrace"}, exitUsage, "port: no such recording (name the recordings first"},
		{"not a recording", []string{"replay", "out.pcapng"}, exitPartial, "out.pcapng: offset 0: not a nettrace recording"},
	})
	dir := t.TempDir()
	good := writeRecording(t, filepath.Join(dir, "good.ntrace"))
	// A record whose bytes were changed (its checksum no longer holds)
	// midway, and a file cut off inside its last record: the output covers
	// what was readable, exit 3.
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)/2] ^= 0xff
	os.WriteFile(filepath.Join(dir, "corrupt.ntrace"), corrupt, 0o600)
	os.WriteFile(filepath.Join(dir, "cut.ntrace"), good[:len(good)-7], 0o600)
	for _, name := range []string{"corrupt.ntrace", "cut.ntrace"} {
		if r := nettrace(t, dir, nil, "replay", name); r.code != exitPartial || !strings.Contains(r.stderr, name+": offset ") {
			t.Errorf("replay %s: exit %d, %q; want exit 3 naming the file and offset", name, r.code, r.stderr)
		}
	}
	// Standard output full or closed: the flows could not be written.
	for _, redirect := range []string{"-o text >/dev/full", "-o json >/dev/full", ">&-"} {
		cmd := exec.Command("sh", "-c", `"$0" replay good.ntrace `+redirect, os.Args[0])
		cmd.Dir, cmd.Env = dir, append(os.Environ(), runAsNettrace+"=1")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure || !strings.Contains(string(out), "write output") {
			t.Errorf("replay good.ntrace %s: %v, %q; want exit 1 and the write error", redirect, err, out)
		}
	}
}

// Standard input is a recording ("-"), and so is a pipe; export reads it
// once.
func TestBadInputStreams(t *testing.T) {
	dir := t.TempDir()
	good := writeRecording(t, filepath.Join(dir, "good.ntrace"))
	r := nettrace(t, dir, good, "replay", "-o", "json", "-")
	if r.code != exitOK || !strings.Contains(r.stdout, `"rule":"snat-missing-on-tunnel"`) {
		t.Errorf("replay - < good.ntrace: exit %d, %s; want incident 1's finding", r.code, r.stderr)
	}
	r = nettrace(t, dir, good, "export", "--pcapng", "stdin.pcapng", "-")
	if r.code != exitOK || !regexp.MustCompile(`packets=[1-9]`).MatchString(r.stderr) {
		t.Errorf("export --pcapng stdin.pcapng - < good.ntrace: exit %d, %s; want its packets", r.code, r.stderr)
	}
	// A pipe, as <(cat good.ntrace) gives.
	cmd := exec.Command("sh", "-c", `cat good.ntrace | "$0" export --pcapng pipe.pcapng /dev/stdin`, os.Args[0])
	cmd.Dir, cmd.Env = dir, append(os.Environ(), runAsNettrace+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("export from a pipe: %v\n%s", err, out)
	}
	if a, b := files(t, dir)["stdin.pcapng"], files(t, dir)["pipe.pcapng"]; a != b {
		t.Errorf("export of standard input (%d bytes) and of a pipe (%d bytes) differ", len(a), len(b))
	}
	// Bad bytes on standard input are named as such.
	r = nettrace(t, dir, []byte("not a recording"), "replay", "-")
	if r.code != exitPartial || !strings.Contains(r.firstLine(), "standard input: offset 0: not a nettrace recording") {
		t.Errorf("replay - < junk: exit %d, %q", r.code, r.firstLine())
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "nettrace-input-*")); len(left) > 0 {
		t.Errorf("copies of standard input left behind: %v", left)
	}
}

// Diagnostics follow --log-format, errors and the summary too; cobra's
// suggestions are printed as cobra prints them; --version says what a bug
// report needs.
func TestBadInputDiagnostics(t *testing.T) {
	dir := t.TempDir()
	writeRecording(t, filepath.Join(dir, "good.ntrace"))
	for _, args := range [][]string{
		{"--log-format", "json", "replay", "good.ntrace"},
		{"--log-format", "json", "replay", "--max-flows", "0", "good.ntrace"},
		{"--log-format", "json", "replay", "gone.ntrace"},
		{"--log-format", "json", "replay", "--bogus"},
		{"--log-format", "json", "export", "--pcapng", "x.pcapng", "good.ntrace"},
	} {
		r := nettrace(t, dir, nil, args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		for _, l := range lines {
			var v map[string]any
			if json.Unmarshal([]byte(l), &v) != nil {
				t.Errorf("nettrace %s: a line not JSON: %q", strings.Join(args, " "), l)
			}
		}
		if r.code != exitOK && !strings.Contains(lines[len(lines)-1], `"exit_code":`) {
			t.Errorf("nettrace %s: the error line %q has no exit code", strings.Join(args, " "), lines[len(lines)-1])
		}
	}
	if r := nettrace(t, dir, nil, "--log-format", "json", "replay", "good.ntrace"); !strings.Contains(r.stderr, `"summary":{"type":"summary"`) {
		t.Errorf("replay's summary is not in the JSON diagnostics:\n%s", r.stderr)
	}
	if r := nettrace(t, dir, nil, "wtach"); !strings.Contains(r.stderr, "Did you mean this?\n\twatch\n") {
		t.Errorf("a mistyped command's suggestion, as cobra prints it: %q", r.stderr)
	}
	r := nettrace(t, dir, nil, "--version")
	for _, w := range []string{"nettrace 0.1.0-dev\n", "\nmodule ", "\ncommit ", "\nbpf objects "} {
		if r.code != exitOK || !strings.Contains(r.stdout, w) {
			t.Errorf("--version: exit %d, %q; want %q", r.code, r.stdout, w)
		}
	}
}

// Filter errors name what is not supported and the limit reached, and
// check host bits and masks as tcpdump does.
func TestBadInputFilters(t *testing.T) {
	hosts := make([]string, 33)
	for i := range hosts {
		hosts[i] = "host 10.0.0." + string(rune('1'+i%9))
	}
	runClass(t, []badInput{
		{"host bits set", []string{"replay", "good.ntrace", "net 10.0.0.1/8"}, exitUsage, "net 10.0.0.1/8 has host bits set: the network is 10.0.0.0/8"},
		{"a mask not contiguous", []string{"replay", "good.ntrace", "net", "10.0.0.0", "mask", "255.0.255.0"}, exitUsage, "mask 255.0.255.0 is not contiguous"},
		{"33 hosts", []string{"replay", "good.ntrace", strings.Join(hosts, " or ")}, exitUsage, "too long for the kernel: 65 instructions, at most 64"},
		{"a byte offset", []string{"replay", "good.ntrace", "tcp[tcpflags] & tcp-syn != 0"}, exitUsage, "byte-offset expressions such as tcp[13] or tcp[tcpflags] are not supported yet"},
		{"watch's filter too", []string{"watch", "ether host 00:11:22:33:44:55"}, exitUsage, "link-layer filters (ether, vlan, mpls, arp) are not supported yet"},
	})
}

// recordSplit records incident 1's connection ten times over into parts
// of about 2 kB (the recorder's -C), and returns the parts in order.
func recordSplit(t *testing.T, path string) []string {
	t.Helper()
	meta := trace.Meta{Nettrace: "test", Host: "node1", MonoNS: 1, WallNS: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).UnixNano()}
	rec, err := trace.NewRecorder(path, meta, fixture.Context{}, trace.RecordOptions{FileBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	for c := range 10 {
		for _, e := range fixture.SNATMissing(false) {
			fixture.Repeat(&e, c, 10_000_000_000)
			rec.Event(&e)
		}
		rec.Flush()
	}
	st, err := rec.Close(trace.Summary{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Files) < 4 {
		t.Fatalf("the run split into %d parts, want 4 or more", len(st.Files))
	}
	return st.Files
}

// Split runs are checked: each part once, and a part missing between
// the parts given named; two runs given together stay two.
func TestBadInputSplitRuns(t *testing.T) {
	dir := t.TempDir()
	parts := recordSplit(t, filepath.Join(dir, "node.ntrace"))
	for i := range parts {
		parts[i] = filepath.Base(parts[i])
	}
	whole := nettrace(t, dir, nil, append([]string{"replay", "-o", "json"}, parts...)...)
	if whole.code != exitOK || strings.Count(whole.stdout, `"rule":"snat-missing-on-tunnel"`) != 10 {
		t.Fatalf("replay of the %d parts: exit %d, %d findings, want 10:\n%s", len(parts), whole.code, strings.Count(whole.stdout, `"rule":"snat-missing-on-tunnel"`), whole.stderr)
	}
	twice := nettrace(t, dir, nil, "replay", parts[0], parts[1], parts[1])
	if twice.code != exitUsage || !strings.Contains(twice.firstLine(), "the same part of a recording given twice: "+parts[1]+" and "+parts[1]+" are both part 2") {
		t.Errorf("replay with part 2 twice: exit %d, %q", twice.code, twice.firstLine())
	}
	copied := filepath.Join(dir, "copy.ntrace")
	b, _ := os.ReadFile(filepath.Join(dir, parts[0]))
	os.WriteFile(copied, b, 0o600)
	if r := nettrace(t, dir, nil, "export", "--pcapng", "x.pcapng", parts[0], "copy.ntrace"); r.code != exitUsage || !strings.Contains(r.firstLine(), "both part 1") {
		t.Errorf("export with part 1 and its copy: exit %d, %q", r.code, r.firstLine())
	}
	gap := nettrace(t, dir, nil, "replay", parts[0], parts[2])
	if gap.code != exitOK || !strings.Contains(gap.stderr, "part 2 is missing of run") || !strings.Contains(gap.stderr, "between "+parts[0]+" and "+parts[2]) {
		t.Errorf("replay with part 2 missing: exit %d, %s", gap.code, gap.stderr)
	}
	// The oldest parts removed (as -W does) are no gap.
	if newest := nettrace(t, dir, nil, "replay", parts[2], parts[3]); newest.code != exitOK || strings.Contains(newest.stderr, "missing of run") {
		t.Errorf("replay of the newest parts: exit %d, %s", newest.code, newest.stderr)
	}
	// Another run of the same host: two recordings, each whole.
	other := recordSplit(t, filepath.Join(dir, "again.ntrace"))
	if r := nettrace(t, dir, nil, "replay", "-o", "json", parts[0], filepath.Base(other[0])); r.code != exitOK || strings.Contains(r.stderr, "twice") {
		t.Errorf("replay of two runs' first parts: exit %d, %s", r.code, r.stderr)
	}
}

// A recording can not take the machine's memory: one whose rulesets
// inflate past what a recording may make nettrace hold (three of 40 MiB
// in under a megabyte) replays up to the record that would pass it,
// named, and exits 3.
func TestBadInputMemoryBound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inflating.ntrace")
	w, err := trace.Create(path, trace.Meta{Nettrace: "test", MonoNS: 1, WallNS: 1}, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("-A KUBE-SERVICES -j RETURN\n", trace.MaxHeld*5/8/27)
	for i := range 3 {
		if err := w.Ruleset(ruleset.Snapshot{Netns: uint32(i + 1), Text: big}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range fixture.SNATMissing(false) {
		w.Event(&e)
	}
	if err := w.Close(trace.Summary{}); err != nil {
		t.Fatal(err)
	}
	r := nettrace(t, dir, nil, "replay", "inflating.ntrace")
	if r.code != exitPartial || !strings.Contains(r.stderr, "inflating.ntrace: offset ") || !strings.Contains(r.stderr, "ruleset record: it would pass the 64 MiB a recording may make nettrace hold") {
		t.Errorf("replay of rulesets past the budget: exit %d, %s", r.code, r.stderr)
	}
}

// The exit codes are one table: the README's and --help's say the same.
func TestExitCodesDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{exitOK, exitFailure, exitUsage, exitPartial} {
		if !strings.Contains(string(readme), "\n| "+strconv.Itoa(code)+" | ") {
			t.Errorf("the README's exit code table has no row for %d", code)
		}
		if !strings.Contains(exitCodesHelp, " "+strconv.Itoa(code)+" ") {
			t.Errorf("--help's exit codes say nothing of %d", code)
		}
	}
	r := nettrace(t, t.TempDir(), nil, "replay", "--help")
	if !strings.Contains(r.stdout, "Exit codes: 0 done") {
		t.Errorf("replay --help has no exit codes:\n%s", r.stdout)
	}
}
