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
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/engine"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

type globalFlags struct {
	logLevel   string
	logFormat  string
	cpuProfile string
	memProfile string
}

// Exit codes, the same for every command (README, nettrace --help).
const (
	exitOK = 0
	// exitFailure: the command could not do its work (the kernel refused
	// a program, a file could not be opened or written, no root).
	exitFailure = 1
	// exitUsage: the command line is wrong (a flag, an argument, a
	// filter, a command); nothing was attached, read or written.
	exitUsage = 2
	// exitPartial: a recording is cut off, corrupt or not a recording:
	// the output covers what of it was readable.
	exitPartial = 3
)

const exitCodesHelp = `Exit codes: 0 done; 1 failed (the kernel refused, a file could not be
opened or written, no root); 2 the command line is wrong (nothing was
attached, read or written); 3 a recording is cut off, corrupt or not a
recording (the output covers what was readable).`

// Main runs the command line and returns the process exit code.
func Main(args []string) int {
	var g globalFlags
	// ran says the command line was parsed and the command began: an
	// error before is cobra's word on the command line (exit 2).
	ran := false
	root := &cobra.Command{
		Use:   "nettrace",
		Short: "Trace what the kernel does to your packets: NAT, routing, vxlan, listeners, drops",
		Long: `nettrace attaches eBPF programs where the kernel translates, re-routes,
encapsulates, queues and drops packets, and reports each step of the packets
you select with a pcap-style filter, across network namespaces.

` + exitCodesHelp,
		Version:       nettraceVersion,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Hashing the BPF objects is left to --version itself.
	cobra.AddTemplateFunc("versionText", versionText)
	root.SetVersionTemplate("{{versionText}}")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "diagnostics level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "console", "diagnostics format on stderr: console or json")
	root.PersistentFlags().StringVar(&g.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) here")
	root.PersistentFlags().StringVar(&g.memProfile, "memprofile", "", "write a heap profile (pprof) here at exit")
	root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentFlags().MarkHidden("memprofile")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		ran = true
		if writesStdout[cmd.Name()] && stdoutClosed() {
			return errors.New("write output: standard output is closed (>&-): redirect it to a file, or to /dev/null to discard it")
		}
		return g.startProfiles()
	}
	defer g.stopProfiles()
	root.AddCommand(newProbesCommand(&g), newWatchCommand(&g), newRecordCommand(&g), newReplayCommand(&g), newExportCommand(&g))
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	code := exitCode(err, ran)
	msg := oneLine(err)
	if !ran {
		// cobra's own words, its suggestions on their lines as it prints
		// them, and where the usage is.
		msg = strings.TrimSpace(err.Error()) + "\nRun '" + cmd.CommandPath() + " --help' for usage."
	}
	g.reportError(msg, code)
	return code
}

// writesStdout are the commands whose output is the point of running
// them, on standard output. Not watch: daemon tools (start-stop-daemon
// --background) put /dev/null read-write there too, and watch -w records
// all the same.
var writesStdout = map[string]bool{"replay": true, "probes": true}

// stdoutClosed says whether standard output was closed when nettrace
// started. Go's runtime puts /dev/null, opened read-write, in the place of
// a standard descriptor closed at start, so that nothing else is written
// there by mistake; every write to it would then succeed unseen. A shell's
// >/dev/null opens it write-only.
func stdoutClosed() bool {
	var st, null unix.Stat_t
	if unix.Fstat(1, &st) != nil || unix.Stat("/dev/null", &null) != nil || st.Rdev != null.Rdev || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return false
	}
	flags, err := unix.FcntlInt(1, unix.F_GETFL, 0)
	return err == nil && flags&unix.O_ACCMODE == unix.O_RDWR
}

// exitCode is the exit code of a command that failed with err; ran says
// whether the command began (past cobra's parsing of the command line).
func exitCode(err error, ran bool) int {
	var ue usageError
	var pe partialError
	var te *trace.Error
	switch {
	case !ran || errors.As(err, &ue), errors.Is(err, trace.ErrPartTwice):
		return exitUsage
	case errors.As(err, &pe), errors.As(err, &te):
		return exitPartial
	}
	return exitFailure
}

// reportError says why the command failed, in the diagnostics' format.
func (g *globalFlags) reportError(msg string, code int) {
	if g.logFormat == "json" {
		l := zerolog.New(os.Stderr).With().Timestamp().Logger()
		l.Error().Int("exit_code", code).Msg(msg)
		return
	}
	fmt.Fprintf(os.Stderr, "nettrace: %s\n", msg)
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

// summarize says a run's summary in the diagnostics' format: text lines,
// or one JSON record holding the summary as -o json writes it.
func (g *globalFlags) summarize(log zerolog.Logger) func(output.Summary) {
	if g.logFormat != "json" {
		return nil
	}
	return func(s output.Summary) { log.Info().RawJSON("summary", engine.SummaryJSON(s)).Msg("summary") }
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
