// Command verifier measures what nettrace's BPF programs cost the kernel's
// verifier, the work every start of nettrace pays before it attaches: it
// loads each program of each object alone, its handlers enabled, and
// prints the instructions the verifier processed and the load's time. A
// program this kernel cannot load (fentry where it is refused) is named
// with the reason. Nothing stays loaded.
//
// Usage: go run ./scripts/bench/verifier [internal/probe/*_x86_bpfel.o ...]   (root)
// Without arguments it measures the objects of the machine's architecture.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// linuxArch is bpf2go's name of an object's architecture, in its file
// names.
var linuxArch = map[string]string{"amd64": "x86", "arm64": "arm64"}

// processed is the verifier's statistics line (LogLevelStats).
var processed = regexp.MustCompile(`processed (\d+) insns`)

func main() {
	objects := os.Args[1:]
	if len(objects) == 0 {
		objects, _ = filepath.Glob("internal/probe/*_" + linuxArch[runtime.GOARCH] + "_bpfel.o")
	}
	if len(objects) == 0 {
		fmt.Fprintln(os.Stderr, "verifier: no objects (run from the repository after make build, or name them)")
		os.Exit(2)
	}
	total := 0
	for _, obj := range objects {
		n, err := measure(obj)
		if err != nil {
			fmt.Fprintln(os.Stderr, "verifier:", err)
			os.Exit(1)
		}
		total += n
	}
	fmt.Printf("%-48s %9d\n", "total processed instructions", total)
}

// measure loads each program of obj alone and returns the instructions
// the verifier processed for those this kernel loads.
func measure(obj string) (int, error) {
	spec, err := ebpf.LoadCollectionSpec(obj)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", obj, err)
	}
	names := make([]string, 0, len(spec.Programs))
	for name := range spec.Programs {
		names = append(names, name)
	}
	sort.Strings(names)
	total := 0
	for _, name := range names {
		insns, took, err := load(spec, name)
		label := filepath.Base(obj) + " " + name
		if err != nil {
			fmt.Printf("%-48s not loadable here: %v\n", label, err)
			continue
		}
		fmt.Printf("%-48s %9d %8s\n", label, insns, took.Round(time.Millisecond))
		total += insns
	}
	return total, nil
}

// load loads one program of spec, with every handler switch (the sites'
// on_* constants) on, as a tracer choosing every tracepoint method would.
func load(spec *ebpf.CollectionSpec, name string) (int, time.Duration, error) {
	one := spec.Copy()
	for other := range one.Programs {
		if other != name {
			delete(one.Programs, other)
		}
	}
	for v, vs := range one.Variables {
		if strings.HasPrefix(v, "on_") {
			if err := vs.Set(true); err != nil {
				return 0, 0, fmt.Errorf("setting %s: %w", v, err)
			}
		}
	}
	start := time.Now()
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats},
	})
	took := time.Since(start)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) && len(ve.Log) > 0 {
			return 0, 0, fmt.Errorf("%s", ve.Log[len(ve.Log)-1])
		}
		return 0, 0, err
	}
	defer coll.Close()
	m := processed.FindStringSubmatch(coll.Programs[name].VerifierLog)
	if m == nil {
		return 0, 0, fmt.Errorf("no statistics in the verifier's log")
	}
	n, err := strconv.Atoi(m[1])
	return n, took, err
}
