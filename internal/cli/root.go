// Package cli is nettrace's command line: flag parsing, logging set-up, the
// terminal, and for each command the assembly of probes, watchers and
// recorders around the engine (internal/engine).
package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

type globalFlags struct {
	logLevel   string
	logFormat  string
	cpuProfile string
	memProfile string
}

// Main runs the command line and returns the process exit code.
func Main(args []string) int {
	var g globalFlags
	root := &cobra.Command{
		Use:   "nettrace",
		Short: "Trace what the kernel does to your packets: NAT, routing, vxlan, listeners, drops",
		Long: `nettrace attaches eBPF programs where the kernel translates, re-routes,
encapsulates, queues and drops packets, and reports each step of the packets
you select with a pcap-style filter, across network namespaces.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "diagnostics level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "console", "diagnostics format on stderr: console or json")
	root.PersistentFlags().StringVar(&g.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) here")
	root.PersistentFlags().StringVar(&g.memProfile, "memprofile", "", "write a heap profile (pprof) here at exit")
	root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentFlags().MarkHidden("memprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return g.startProfiles() }
	defer g.stopProfiles()
	root.AddCommand(newProbesCommand(&g), newWatchCommand(&g), newRecordCommand(&g), newReplayCommand(&g), newExportCommand(&g))
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "nettrace: %s\n", oneLine(err))
		var ue usageError
		var pe partialError
		switch {
		case errors.As(err, &ue):
			return 2
		case errors.As(err, &pe):
			return 3
		}
		return 1
	}
	return 0
}

// usageError marks a mistake in the command line (exit code 2).
type usageError struct{ error }

func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

func (g *globalFlags) logger() (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(g.logLevel)
	if err != nil || g.logLevel == "" {
		return zerolog.Nop(), usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)}
	}
	var l zerolog.Logger
	switch g.logFormat {
	case "json":
		l = zerolog.New(os.Stderr)
	case "console":
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05", NoColor: !colourOn(os.Stderr)})
	default:
		return zerolog.Nop(), usageError{fmt.Errorf("--log-format %q: want console or json", g.logFormat)}
	}
	return l.Level(lvl).With().Timestamp().Logger(), nil
}

func requireRoot(what string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs root (it loads eBPF programs): run it as root (or with sudo)", what)
	}
	return nil
}

var cpuProfileFile *os.File

// startProfiles starts the profiles asked for: they measure nettrace
// itself (docs/performance.md).
func (g *globalFlags) startProfiles() error {
	if g.cpuProfile == "" {
		return nil
	}
	f, err := os.Create(g.cpuProfile)
	if err != nil {
		return err
	}
	cpuProfileFile = f
	return pprof.StartCPUProfile(f)
}

func (g *globalFlags) stopProfiles() {
	if cpuProfileFile != nil {
		pprof.StopCPUProfile()
		cpuProfileFile.Close()
	}
	if g.memProfile != "" {
		if f, err := os.Create(g.memProfile); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
}
