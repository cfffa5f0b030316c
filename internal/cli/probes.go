package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/probe"
)

type probesReport struct {
	Kernel   kernel.Facts   `json:"kernel"`
	Points   []probe.Status `json:"points"`
	AttachMS float64        `json:"attach_ms"` // load and attach of every point
	DetachMS float64        `json:"detach_ms"`
}

func newProbesCommand(g *globalFlags) *cobra.Command {
	var asJSON bool
	var methods []string
	cmd := &cobra.Command{
		Use:   "probes",
		Short: "Show how each observation point attaches on this kernel, or why it cannot",
		Long: `probes loads and attaches every observation point for a moment, exactly as
watch would, and reports the method each one uses (fentry, kprobe, tp_btf,
tracepoint, netfilter, sock_diag) and the kernel symbol or tracepoint it is
attached to, or why each method is unavailable.`,
		Example: `  nettrace probes
  nettrace probes --json | jq '.points[] | {point, method}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if err := requireRoot("nettrace probes"); err != nil {
				return err
			}
			forced, err := parseMethods(methods)
			if err != nil {
				return err
			}
			report, err := runProbes(log, forced)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(report)
			}
			printProbes(report)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringSliceVar(&methods, "method", nil, "force a method for a point: POINT=METHOD (repeatable)")
	return cmd
}

func runProbes(log zerolog.Logger, forced map[string]probe.Method) (probesReport, error) {
	facts := kernel.Probe(func(what, where string) { log.Info().Str("fs", what).Str("at", where).Msg("mounted") })
	syms, err := kernel.LoadSymbols()
	if err != nil {
		return probesReport{}, err
	}
	targets, err := netns.Resolve([]string{"self"})
	if err != nil {
		return probesReport{}, err
	}
	// Loaded exactly as watch loads them by default, so that what probes
	// reports is what watch gets.
	tr, err := probe.Open(probe.Options{Namespaces: targets, Methods: forced, Log: log, SnapLen: defaultSnapLen}, facts, syms)
	if err != nil {
		return probesReport{}, err
	}
	r := probesReport{Kernel: facts, Points: tr.Statuses(), AttachMS: float64(tr.AttachTime.Microseconds()) / 1e3}
	start := time.Now()
	tr.Close()
	r.DetachMS = float64(time.Since(start).Microseconds()) / 1e3
	return r, nil
}

func printProbes(r probesReport) {
	fmt.Printf("kernel %s, BTF %s, lockdown %s, kprobes %s; attach %.0f ms, detach %.0f ms\n\n", r.Kernel.Release,
		yesNo(r.Kernel.BTF), r.Kernel.Lockdown, yesNo(r.Kernel.Kprobes), r.AttachMS, r.DetachMS)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POINT\tMETHOD\tMS\tTARGET\tNOTES")
	for _, s := range r.Points {
		var notes []string
		if s.Note != "" {
			notes = append(notes, s.Note)
		}
		for _, a := range s.Skipped {
			if a.Method != "" && !strings.HasPrefix(a.Reason, string(a.Method)) {
				notes = append(notes, fmt.Sprintf("%s: %s", a.Method, a.Reason))
			} else {
				notes = append(notes, a.Reason)
			}
		}
		method := string(s.Method)
		if !s.Active() {
			method = "UNAVAILABLE"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\n", s.Point, method, s.AttachMS, s.Target, strings.Join(notes, "; "))
	}
	tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func parseMethods(specs []string) (map[string]probe.Method, error) {
	out := map[string]probe.Method{}
	valid := map[string]bool{}
	for _, p := range probe.PointNames() {
		valid[p] = true
	}
	for _, s := range specs {
		p, m, ok := strings.Cut(s, "=")
		if !ok || !valid[p] || m == "" {
			return nil, usageError{fmt.Errorf("--method %q: want POINT=METHOD with POINT one of %s", s, strings.Join(probe.PointNames(), ", "))}
		}
		methods := probe.PointMethods(p)
		if !slices.Contains(methods, probe.Method(m)) {
			names := make([]string, len(methods))
			for i, m := range methods {
				names[i] = string(m)
			}
			return nil, usageError{fmt.Errorf("--method %q: point %s has no method %q; its methods: %s", s, p, m, strings.Join(names, ", "))}
		}
		out[p] = probe.Method(m)
	}
	return out, nil
}
