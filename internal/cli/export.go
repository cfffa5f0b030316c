package cli

import (
	"errors"

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
device events, a packet id shared by every state of one packet (the packet
as replay's flows hold it; Wireshark filter frame.packet_id == 7), and
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
			log, err := g.logger()
			if err != nil {
				return err
			}
			if out == "" {
				return usageError{errors.New("export needs --pcapng OUT")}
			}
			if err := checkRecordingNames(args); err != nil {
				return err
			}
			if err := refuseOverwrite("--pcapng", out, args); err != nil {
				return err
			}
			files, named, done, err := readableInputs(args)
			if err != nil {
				return err
			}
			defer done()
			n, last, err := exportPcapng(files, out)
			if err != nil {
				return named(err)
			}
			logGaps(log, last, named)
			log.Info().Int("packets", n).Str("file", out).Msg("exported")
			return named(streamErr(last))
		},
	}
	cmd.Flags().StringVar(&out, "pcapng", "", "the pcapng file to write (mode 0600: it holds packet headers)")
	return cmd
}

// exportPcapng writes the recordings' packets to out, whole or not at all,
// and returns how many it wrote and the stream that read them last, which
// says whether they were whole. The recordings are read twice (flows and
// their explanations first, for each packet's id and the rules of each NAT
// step, then the packets); out is created once the first reading has ended.
func exportPcapng(files []string, out string) (int, *trace.Stream, error) {
	s, _, closeAll, err := engine.OpenRecordings(files)
	if err != nil {
		return 0, nil, err
	}
	notes, err := engine.StepNotes(s, engine.StreamSources(s))
	closeAll()
	if err != nil {
		return 0, nil, err
	}
	s, _, closeAll, err = engine.OpenRecordings(files)
	if err != nil {
		return 0, nil, err
	}
	defer closeAll()
	f, err := createOutput(out, 0o600)
	if err != nil {
		return 0, nil, err
	}
	n, err := output.ExportPcapng(s, engine.StreamNames(s), notes, f)
	if err != nil {
		f.abort()
		return 0, nil, err
	}
	return n, s, f.commit()
}
