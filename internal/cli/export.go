package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/nettrace-dev/nettrace/internal/engine"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

func newExportCommand(g *globalFlags) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export --pcapng OUT FILE...",
		Short: "Export the packets of recordings to pcapng, for Wireshark and tshark",
		Long: `export writes every packet state of the recordings to a pcapng file: one
interface per namespace and device ("ntlab-n1/eth0"), the direction on
device events, a packet id shared by every state of one packet, and
comments with nettrace's metadata as "key: value" (point, hook, netns,
tuple, nat_before, nat_after, translation, netfilter_rule,
netfilter_rule_not_reached, ct, ct_status, drop_reason, drop_location, vni,
vtep). The rules of a connection's NAT steps are the ones replay names:
export reads the recordings twice, first into flows and their
explanations, then for the packets. In Wireshark: frame.comment ==
"drop_reason: IP_RPFILTER".`,
		Example: `  nettrace export --pcapng incident.pcapng incident.ntrace
  tshark -r incident.pcapng -Y 'frame.comment contains "drop_reason"'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := g.logger(); err != nil {
				return err
			}
			if out == "" {
				return usageError{errors.New("export needs --pcapng OUT")}
			}
			// The recordings are read twice; the last reading's stream
			// says whether they were whole.
			var last *trace.Stream
			var closers []func()
			open := func() (output.EventSource, output.Names, error) {
				s, _, closeAll, err := engine.OpenRecordings(args)
				if err != nil {
					return nil, output.Names{}, err
				}
				closers = append(closers, closeAll)
				last = s
				return s, engine.StreamNames(s), nil
			}
			defer func() {
				for _, c := range closers {
					c()
				}
			}()
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return fmt.Errorf("create %s: %w", out, err)
			}
			n, err := output.ExportPcapng(open, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "nettrace: %d packets written to %s\n", n, out)
			return streamErr(last)
		},
	}
	cmd.Flags().StringVar(&out, "pcapng", "", "the pcapng file to write (mode 0600: it holds packet headers)")
	return cmd
}
