package explain

import (
	"reflect"
	"slices"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// socketDrops are the drop reasons of a TCP socket's ordinary handling of
// a segment, which the kernel gate does not take for trouble
// (nt_socket_drop in bpf/include/event.h).
var socketDrops = []string{"NOT_SPECIFIED", "NO_SOCKET", "SOCKET_CLOSE", "QUEUE_PURGE", "TCP_CLOSE", "TCP_RESET",
	"TCP_ABORT_ON_DATA", "TCP_FLAGS", "TCP_OLD_DATA", "TCP_OLD_SEQUENCE", "TCP_INVALID_SEQUENCE", "TCP_OLD_ACK",
	"TCP_TOO_OLD_ACK", "TCP_ZEROWINDOW", "TCP_OFOMERGE"}

// shippedBy is what of a flow's events makes the kernel gate ship its
// connection, as bpf/include/gate.h decides: the model the rules' stated
// triggers are checked against.
func shippedBy(f *flow.Flow) map[Trigger]bool {
	got := map[Trigger]bool{}
	if t := f.Tuple(); t.Proto != event.ProtoTCP || !t.Src.Is4() {
		got[Ungated] = true
	}
	answered := false
	syns := map[[2]uint64]bool{}
	// The packets that carried SYN: a reset answering one refuses.
	synSkbs := map[uint64]bool{}
	for _, p := range f.Packets {
		for _, e := range p.Events {
			if e.Tuple.Proto == event.ProtoTCP && e.Tuple.TCPFlags&tcpSYN != 0 {
				synSkbs[e.Skb] = true
			}
		}
	}
	for _, p := range f.Packets {
		for i := range p.Events {
			e := &p.Events[i]
			flags := e.Tuple.TCPFlags
			switch {
			case e.Point == event.PointDrop && (e.Tuple.Proto != event.ProtoTCP || flags&tcpSYN != 0 ||
				!slices.Contains(socketDrops, fixture.ReasonNames[e.Drop.Reason]) || unconfirmed(e)):
				got[TriggerDrop] = true
			case e.Point == event.PointSYN && e.SYN.Outcome.Dropped():
				got[TriggerListener] = true
			case e.Point == event.PointNAT && e.Flags&event.FlagCTInvalid != 0:
				got[TriggerInvalid] = true
			case e.Point == event.PointTCP:
				socketTrigger(e, answered, synSkbs[e.Skb], got)
			}
			switch {
			case e.Tuple.Proto != event.ProtoTCP:
			case flags&(tcpSYN|tcpACK) == tcpSYN:
				// SYNs of several packets in one flow are one SYN sent
				// again: a new initial sequence number starts a new flow,
				// as it begins a new connection in the kernel gate.
				syns[[2]uint64{e.Skb, e.SkbSeen}] = true
				if len(syns) > 1 {
					got[TriggerSYNAgain] = true
				}
			case flags&(tcpSYN|tcpACK) == tcpSYN|tcpACK:
				answered = true
			case flags&tcpRST != 0 && !answered:
				got[TriggerReset] = true
			}
		}
	}
	for i := range f.Socket {
		socketTrigger(&f.Socket[i], answered, synSkbs[f.Socket[i].Skb], got)
	}
	return got
}

// unconfirmed says whether a drop's packet made a conntrack entry never
// confirmed: its connection's first packet.
func unconfirmed(e *event.Event) bool {
	return e.Flags&event.FlagCT != 0 && e.CT.Info == 2 /* IP_CT_NEW */ && e.CT.Status&event.CTConfirmed == 0
}

// socketTrigger adds what a TCP point's event triggers, as the tcp point
// judges it: a reset sent refuses when the packet it answers carried SYN
// (answersSYN); one received, when it came before any answer.
func socketTrigger(e *event.Event, answered, answersSYN bool, got map[Trigger]bool) {
	switch {
	case e.Kind == event.KindSynAckRetransmit:
		got[TriggerSYNACKAgain] = true
	case e.Kind == event.KindResetSent && answersSYN, e.Kind == event.KindResetReceived && !answered:
		got[TriggerReset] = true
	case e.Kind == event.KindTCPState && e.TCP.OldState == 2 /* SYN_SENT */ && e.TCP.NewState == 7 /* CLOSE */ :
		got[TriggerConnectGivenUp] = true
	}
}

// requireShipped requires that a flow the rule fired on shows one of the
// triggers the rule states: otherwise its evidence reaches it only
// without the gate, and the DaemonSet's recorder would never name it.
func requireShipped(t *testing.T, rule string, f *flow.Flow) {
	t.Helper()
	r := ruleByID(rule)
	if r == nil {
		t.Fatalf("no rule %s", rule)
	}
	got := shippedBy(f)
	for _, tr := range r.Triggers {
		if got[tr] {
			return
		}
	}
	var shown []string
	for tr := range got {
		shown = append(shown, tr.String())
	}
	t.Errorf("%s fired on a flow the gate ships only for %v, none of its triggers %v: state the trigger that carries its evidence", rule, shown, r.Triggers)
}

func ruleByID(id string) *Rule {
	for i := range Rules {
		if Rules[i].ID == id {
			return &Rules[i]
		}
	}
	return nil
}

// ruleOfCheck is the rule whose check a table runs.
func ruleOfCheck(check func(*flow.Flow, Context) *Finding) string {
	for _, r := range Rules {
		if reflect.ValueOf(r.Check).Pointer() == reflect.ValueOf(check).Pointer() {
			return r.ID
		}
	}
	return ""
}

// Every rule states at least one trigger, none twice.
func TestRulesStateTheirTriggers(t *testing.T) {
	for _, r := range Rules {
		if len(r.Triggers) == 0 {
			t.Errorf("%s states no trigger", r.ID)
		}
		for i, tr := range r.Triggers {
			if tr < Ungated || tr > TriggerSYNAgain || slices.Contains(r.Triggers[:i], tr) {
				t.Errorf("%s: trigger %v unknown or twice", r.ID, tr)
			}
		}
	}
}
