package test

import (
	"bytes"
	"os/exec"
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
