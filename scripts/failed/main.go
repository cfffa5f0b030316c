// Command failed prints what a test run's failed tests said, from the
// events of `go tool test2json` on its standard input: for each failed
// test without failed subtests, and each test that never finished (the
// run hung or was killed), the lines it logged, the last -lines of them.
// A verbose log of the integration tests (the host's, a guest's) is too
// long to read for the lines that say what differed; these are those
// lines.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// testEvent is the part of test2json's event that matters here.
type testEvent struct {
	Action string
	Test   string
	Output string
}

func main() {
	lines := flag.Int("lines", 150, "the last lines of each failed test's output shown")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *lines); err != nil {
		fmt.Fprintln(os.Stderr, "failed:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, keep int) error {
	output := map[string][]string{}
	var failed, started []string
	ended := map[string]bool{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" {
			continue // a console line test2json could not attribute
		}
		switch e.Action {
		case "output":
			output[e.Test] = append(output[e.Test], strings.TrimRight(e.Output, "\n"))
		case "run":
			started = append(started, e.Test)
		case "fail":
			failed = append(failed, e.Test)
			ended[e.Test] = true
		case "pass", "skip":
			ended[e.Test] = true
		}
	}
	for _, name := range started {
		if !ended[name] {
			failed = append(failed, name) // never finished
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading test2json events: %w", err)
	}
	for _, name := range failed {
		if hasFailedSubtest(name, failed) {
			continue // its subtests' output says it
		}
		lines := output[name]
		how := "failed"
		if !ended[name] {
			how = "did not finish"
		}
		fmt.Fprintf(out, "--- %s %s; what it said", name, how)
		if len(lines) > keep {
			fmt.Fprintf(out, " (its last %d of %d lines)", keep, len(lines))
			lines = lines[len(lines)-keep:]
		}
		fmt.Fprintln(out, ":")
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
	}
	return nil
}

func hasFailedSubtest(name string, failed []string) bool {
	for _, f := range failed {
		if strings.HasPrefix(f, name+"/") {
			return true
		}
	}
	return false
}
