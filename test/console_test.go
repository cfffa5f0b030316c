package test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// Diagnostics written to a file or a pipe carry no colour codes: a log
// kept from a run, or piped to grep, must read as plain text.
func TestRedirectedLogHasNoEscapeCodes(t *testing.T) {
	cmd := exec.Command(nettraceBin, "probes", "--log-level", "debug")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nettrace probes: %v\n%s", err, stderr.String())
	}
	if stderr.Len() == 0 {
		t.Fatal("nettrace probes logged nothing at debug level: nothing to check")
	}
	if i := bytes.Index(stderr.Bytes(), []byte("\x1b[")); i >= 0 {
		t.Errorf("escape code in a redirected log at byte %d:\n%q", i, stderr.String())
	}
}

// On a terminal, watch keeps a status line on stderr (events a second,
// flows open, findings, lost) and clears it before its summary; to a file
// or a pipe it never writes one.
func TestStatusLineOnlyOnATerminal(t *testing.T) {
	ns := newNetns(t, "status")
	args := []string{nettraceBin, "watch", "--netns", ns, "--duration", "3s", "port 1"}

	redirected := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	redirected.Stderr = &stderr
	if err := redirected.Run(); err != nil {
		t.Fatalf("nettrace watch: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "events/s") || strings.Contains(stderr.String(), "\x1b[") {
		t.Errorf("a status line in a redirected stderr:\n%q", stderr.String())
	}

	// script(1) runs watch on a terminal of its own and copies what it
	// shows.
	out, err := exec.Command("script", "--quiet", "--return", "--command", strings.Join(args, " "), "/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("nettrace watch on a terminal: %v\n%q", err, out)
	}
	shown := string(out)
	status := strings.LastIndex(shown, "events/s")
	summary := strings.Index(shown, "nettrace: 0 events in")
	if status < 0 || summary < 0 {
		t.Fatalf("want a status line, then the summary; the terminal showed:\n%q", shown)
	}
	if status > summary || !strings.Contains(shown[status:summary], "\r\x1b[K") {
		t.Errorf("the status line is not cleared before the summary:\n%q", shown)
	}
}
