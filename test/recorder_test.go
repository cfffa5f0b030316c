package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/nettrace-dev/nettrace/test/lab"
)

// upLab brings a lab scenario up, and down again at cleanup.
func upLab(t *testing.T, name string) *lab.Scenario {
	t.Helper()
	sc, err := lab.Up(name, labBin)
	t.Cleanup(func() {
		if err := lab.Down(); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// noiseThenFault runs the lab's background traffic, then the scenario's
// clients: its fault comes late in the run.
func noiseThenFault(t *testing.T, sc *lab.Scenario) lab.NoiseReport {
	t.Helper()
	rep, err := lab.Noise(context.Background(), lab.DefaultNoise)
	if err != nil {
		t.Fatalf("noise: %v", err)
	}
	t.Logf("noise: %s", rep)
	outs, err := lab.Traffic(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(outs)
	return rep
}

// recordedLog is watch's closing "recorded" log line.
type recordedLog struct {
	Events       uint64 `json:"events"`
	Written      uint64 `json:"written"`
	NotWritten   uint64 `json:"not_written"`
	FilesKept    int    `json:"files_kept"`
	FilesRemoved int    `json:"files_removed"`
}

// logLines returns watch's JSON log lines with the given message.
func logLines(t *testing.T, log []byte, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(log))
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && strings.HasPrefix(fmt.Sprint(l["message"]), msg) {
			out = append(out, l)
		}
	}
	return out
}

func recorded(t *testing.T, log []byte) recordedLog {
	t.Helper()
	lines := logLines(t, log, "recorded")
	if len(lines) != 1 {
		t.Fatalf("%d \"recorded\" lines in the log:\n%s", len(lines), log)
	}
	b, _ := json.Marshal(lines[0])
	var r recordedLog
	json.Unmarshal(b, &r)
	return r
}

// replayJSON replays recordings and returns its exit code, the events it
// counted and the rules that fired.
func replayJSON(t *testing.T, files ...string) (code int, events uint64, rules []string) {
	t.Helper()
	cmd := exec.Command(nettraceBin, append([]string{"replay", "-o", "json"}, files...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("replay %v: %v", files, err)
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var o struct {
			Type   string
			Rule   string
			Events map[string]uint64
		}
		json.Unmarshal(sc.Bytes(), &o)
		switch o.Type {
		case "explanation":
			rules = append(rules, o.Rule)
		case "summary":
			for _, n := range o.Events {
				events += n
			}
		}
	}
	if code != 0 {
		t.Logf("replay %v exited %d: %s", files, code, stderr.String())
	}
	return code, events, rules
}

// parts lists a split recording's files, oldest first.
func parts(t *testing.T, path string) []string {
	t.Helper()
	files, _ := filepath.Glob(path + ".*")
	sort.Slice(files, func(i, j int) bool {
		var a, b int
		fmt.Sscanf(strings.TrimPrefix(files[i], path+"."), "%d", &a)
		fmt.Sscanf(strings.TrimPrefix(files[j], path+"."), "%d", &b)
		return a < b
	})
	return files
}

// Under the busy lab's traffic, unfiltered, a recording split at 1 MB with
// 3 files kept: no more files and no larger ones, each replays alone and
// the set replays as one, the incident (late in the run) is found in the
// file that covers it, and the writer loses nothing.
func TestRecordingRotatesUnderLoad(t *testing.T) {
	sc := upLab(t, "snat-missing")
	path := filepath.Join(t.TempDir(), "busy.ntrace")
	const fileBytes, keep = 1_000_000, 3
	w := startWatch(t, "-w", path, "--file-size", "1M", "--files", fmt.Sprint(keep), "--netns", "all", "--ring-size", "67108864")
	noiseThenFault(t, sc)
	w.stop(t)
	st := recorded(t, w.stderr.Bytes())
	t.Logf("recorded: %+v", st)
	if st.NotWritten != 0 || st.Written != st.Events {
		t.Errorf("the writer lost events: %+v", st)
	}
	files := parts(t, path)
	if len(files) != keep || st.FilesKept != keep || st.FilesRemoved == 0 {
		t.Fatalf("files %v (log: %+v): want the newest %d of more", files, st, keep)
	}
	covered := 0
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		// A file ends at the first record past the bound; a ruleset
		// record is the largest.
		if fi.Size() > fileBytes+64<<10 {
			t.Errorf("%s: %d bytes, bound %d", f, fi.Size(), fileBytes)
		}
		code, _, rules := replayJSON(t, f)
		if code != 0 {
			t.Errorf("%s does not replay alone (exit %d)", f, code)
		}
		if hasString(rules, "snat-missing-on-tunnel") {
			covered++
		}
	}
	if covered == 0 {
		t.Errorf("no file alone explains the incident")
	}
	code, _, rules := replayJSON(t, files...)
	if code != 0 || !hasString(rules, "snat-missing-on-tunnel") {
		t.Errorf("the set replays with exit %d and findings %v", code, rules)
	}
}

// free is the room left on a filesystem, in bytes.
func free(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// A recording on a disk that fills up: the recording pauses, said once,
// tracing goes on, it resumes when room is made, the file replays, and
// the counts add up: every event written is in the file.
func TestRecordingSurvivesAFullDisk(t *testing.T) {
	upLab(t, "snat-missing")
	dir := t.TempDir()
	sh(t, "mount", "-t", "tmpfs", "-o", "size=3m", "nettrace-test", dir)
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "full.ntrace")
	w := startWatch(t, "-w", path, "--netns", "all", "--ring-size", "67108864")
	// Until the disk is nearly full, then once more: a write that does
	// not fit is cut back, which leaves up to one chunk (256 KB) free, and
	// the next run of traffic is more than that.
	for i := 0; free(t, dir) > 300<<10; i++ {
		if i == 5 {
			t.Fatalf("the recording did not fill 3 MB in 5 runs of background traffic")
		}
		if _, err := lab.Noise(context.Background(), lab.DefaultNoise); err != nil {
			t.Fatalf("noise: %v", err)
		}
	}
	if _, err := lab.Noise(context.Background(), lab.DefaultNoise); err != nil {
		t.Fatalf("noise: %v", err)
	}
	// Room again: the recording resumes, and fills the disk once more.
	os.Remove(filler)
	if _, err := lab.Noise(context.Background(), lab.DefaultNoise); err != nil {
		t.Fatalf("noise: %v", err)
	}
	w.stop(t)
	paused, resumed := logLines(t, w.stderr.Bytes(), "recording paused"), logLines(t, w.stderr.Bytes(), "recording resumed")
	if len(paused) == 0 || len(resumed) == 0 || len(paused) > len(resumed)+1 {
		t.Errorf("%d pauses and %d resumptions said:\n%s", len(paused), len(resumed), w.stderr.String())
	}
	if msg := fmt.Sprint(paused[0]["error"]); !strings.Contains(msg, "no space left on device") {
		t.Errorf("the pause does not say why: %q", msg)
	}
	st := recorded(t, w.stderr.Bytes())
	t.Logf("recorded: %+v", st)
	if st.NotWritten == 0 || st.Written+st.NotWritten != st.Events {
		t.Errorf("counts do not add up: %+v", st)
	}
	// The file ends with a whole record: with its summary when there was
	// room for it at the end, else where writing last stopped.
	code, events, _ := replayJSON(t, path)
	if code != 0 && code != 3 {
		t.Errorf("the recording does not replay: exit %d", code)
	}
	if events != st.Written {
		t.Errorf("the file replays %d events, %d were written", events, st.Written)
	}
}

// The flight recorder on an intermittent fault: background traffic, then
// syn-overflow once, late. The faulty run keeps exactly one file, which
// replays to the finding with its flow; the healthy twin keeps none.
// Findings on background connections that truly failed (their clients saw
// it) would keep files of their own: they are told apart by their rule.
func TestFlightRecorderKeepsOnlyTheFailure(t *testing.T) {
	twins(t, "syn-overflow", func(t *testing.T, name string, healthy bool) {
		sc := upLab(t, name)
		dir := filepath.Join(t.TempDir(), "flight")
		w := startWatch(t, "--flight", dir, "--flight-after", "1s", "--netns", "all", "--ring-size", "67108864")
		rep := noiseThenFault(t, sc)
		w.stop(t)
		files, _ := filepath.Glob(filepath.Join(dir, "*.ntrace"))
		t.Logf("kept: %v", files)
		withFault := 0
		for _, f := range files {
			code, _, rules := replayJSON(t, f)
			if code != 0 {
				t.Errorf("%s does not replay (exit %d)", f, code)
			}
			if hasString(rules, "syn-dropped-at-listener") {
				withFault++
				if !strings.HasPrefix(filepath.Base(f), "syn-dropped-at-listener-") {
					t.Errorf("%s is not named after its finding", f)
				}
			}
		}
		background := len(rep.Failed) > 0
		switch {
		case healthy && withFault > 0, !healthy && withFault != 1:
			t.Errorf("%d files explain the listener's drops", withFault)
		case !background && healthy && len(files) != 0, !background && !healthy && len(files) != 1:
			t.Errorf("%d files kept, with no background failure", len(files))
		}
	})
}
