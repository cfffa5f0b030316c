package test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// readmeCommands returns the commands of the README's "The two commands"
// section: its indented lines.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## The two commands"
			continue
		}
		if in && strings.HasPrefix(line, "    ") {
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

// The README's two commands work as written in a root shell, without
// sudo: the second is what CI runs (.ci/run), and the first, run here,
// shows incident 1's finding.
func TestREADMECommands(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) != 2 {
		t.Fatalf("the README's two commands: found %q", cmds)
	}
	for _, c := range cmds {
		if strings.Contains(c, "sudo") {
			t.Errorf("%q needs sudo, which a root shell may not have", c)
		}
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	if last := lines[len(lines)-1]; last != cmds[1] {
		t.Errorf(".ci/run runs %q, the README says %q", last, cmds[1])
	}
	demo := exec.Command("sh", "-c", cmds[0])
	demo.Dir = ".."
	out, err := demo.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmds[0], err, out)
	}
	if !strings.Contains(string(out), "snat-missing-on-tunnel: SYN") {
		t.Errorf("%s shows no finding of incident 1:\n%s", cmds[0], out)
	}
}
