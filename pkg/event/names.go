package event

import "strings"

// CTStatus is the status word of a conntrack entry (enum ip_conntrack_status,
// a stable UAPI bit layout).
type CTStatus uint32

// Conntrack status bits nettrace reasons about.
const (
	CTSeenReply    CTStatus = 1 << 1
	CTAssured      CTStatus = 1 << 2
	CTConfirmed    CTStatus = 1 << 3
	CTSrcNAT       CTStatus = 1 << 4
	CTDstNAT       CTStatus = 1 << 5
	CTSrcNATDone   CTStatus = 1 << 7
	CTDstNATDone   CTStatus = 1 << 8
	CTDying        CTStatus = 1 << 9
	CTTemplate     CTStatus = 1 << 11
	ctStatusBitMax          = 16
)

var ctStatusNames = [ctStatusBitMax]string{
	"EXPECTED", "SEEN_REPLY", "ASSURED", "CONFIRMED", "SRC_NAT", "DST_NAT", "SEQ_ADJUST",
	"SRC_NAT_DONE", "DST_NAT_DONE", "DYING", "FIXED_TIMEOUT", "TEMPLATE", "NAT_CLASH",
	"HELPER", "OFFLOAD", "HW_OFFLOAD",
}

// Names lists the names of the bits set.
func (s CTStatus) Names() []string {
	var out []string
	for i, n := range ctStatusNames {
		if s&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

func (s CTStatus) String() string { return strings.Join(s.Names(), "|") }

// TCPStateName names a TCP socket state (include/net/tcp_states.h, UAPI
// values shared with sock_diag).
func TCPStateName(s uint8) string {
	names := [...]string{"", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
		"TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING", "NEW_SYN_RECV"}
	if int(s) < len(names) && s != 0 {
		return names[s]
	}
	return "UNKNOWN"
}

// TCPFlagString renders TCP flags tcpdump-style: S, S., P., F., R.
func TCPFlagString(f uint8) string {
	var b [8]byte
	n := 0
	for _, fl := range []struct {
		bit uint8
		c   byte
	}{{0x02, 'S'}, {0x01, 'F'}, {0x04, 'R'}, {0x08, 'P'}, {0x20, 'U'}} {
		if f&fl.bit != 0 {
			b[n] = fl.c
			n++
		}
	}
	if f&0x10 != 0 {
		b[n] = '.'
		n++
	}
	return string(b[:n])
}

// ProtoName names an IP protocol.
func ProtoName(p uint8) string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoICMP:
		return "icmp"
	case ProtoICMPv6:
		return "icmp6"
	}
	return "ip"
}
