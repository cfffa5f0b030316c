package synwatch

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestParseNetstat(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    netstat
		wantErr bool
	}{
		{"both", "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 12 14\nIpExt: InNoRoutes\nIpExt: 0\n", netstat{12, 14}, false},
		{"order independent", "TcpExt: ListenDrops X ListenOverflows\nTcpExt: 3 9 2\n", netstat{2, 3}, false},
		{"no TcpExt", "IpExt: InNoRoutes\nIpExt: 0\n", netstat{}, true},
		{"header only", "TcpExt: ListenDrops\n", netstat{}, true},
	}
	for _, tt := range tests {
		got, err := parseNetstat([]byte(tt.raw))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func synAt(hook event.Hook, src string, sport uint16, dst string, dport uint16, flags uint8) *event.Event {
	return &event.Event{Point: event.PointNAT, Hook: hook, Netns: 42, Tuple: event.Tuple{
		Src: netip.MustParseAddr(src), Sport: sport, Dst: netip.MustParseAddr(dst), Dport: dport,
		Proto: event.ProtoTCP, TCPFlags: flags}}
}

func onDev(e *event.Event, kind event.Kind) *event.Event {
	e.Point, e.Kind, e.Hook = event.PointDev, kind, event.HookNone
	return e
}

func TestObservePairsSYNWithItsAnswer(t *testing.T) {
	tests := []struct {
		name        string
		events      []*event.Event
		wantPending int
		wantQueued  int
	}{
		{"SYN alone waits", []*event.Event{synAt(event.HookInput, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN)}, 1, 0},
		{"SYN-ACK answers (queued)", []*event.Event{
			synAt(event.HookInput, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN),
			synAt(event.HookOutput, "10.0.0.2", 80, "10.0.0.1", 5000, tcpSYN|tcpACK)}, 0, 1},
		{"RST answers", []*event.Event{
			synAt(event.HookInput, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN),
			synAt(event.HookOutput, "10.0.0.2", 80, "10.0.0.1", 5000, tcpRST|tcpACK)}, 0, 0},
		{"answer to another port does not", []*event.Event{
			synAt(event.HookInput, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN),
			synAt(event.HookOutput, "10.0.0.2", 80, "10.0.0.1", 5001, tcpSYN|tcpACK)}, 1, 0},
		{"SYN-ACK at INPUT is not a SYN", []*event.Event{synAt(event.HookInput, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN|tcpACK)}, 0, 0},
		{"SYN in OUTPUT is outgoing", []*event.Event{synAt(event.HookOutput, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN)}, 0, 0},
		{"SYN received by a device waits", []*event.Event{onDev(synAt(0, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN), event.KindDevRx)}, 1, 0},
		{"a device-only SYN answered makes no listener claim (it may be forwarded)", []*event.Event{
			onDev(synAt(0, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN), event.KindDevRx),
			onDev(synAt(0, "10.0.0.2", 80, "10.0.0.1", 5000, tcpSYN|tcpACK), event.KindDevTx)}, 0, 0},
		{"device then INPUT: delivered here", []*event.Event{
			onDev(synAt(0, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN), event.KindDevRx),
			synAt(event.HookInput, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN),
			onDev(synAt(0, "10.0.0.2", 80, "10.0.0.1", 5000, tcpSYN|tcpACK), event.KindDevTx)}, 0, 1},
	}
	for _, tt := range tests {
		w := New([]netns.Target{{Path: "/nonexistent", Inode: 42}})
		var queued []*event.Event
		for _, e := range tt.events {
			w.Observe(e, func(e *event.Event) { queued = append(queued, e) })
		}
		if len(w.pending) != tt.wantPending {
			t.Errorf("%s: %d pending, want %d", tt.name, len(w.pending), tt.wantPending)
		}
		if len(queued) != tt.wantQueued {
			t.Errorf("%s: %d queued, want %d", tt.name, len(queued), tt.wantQueued)
		}
		for _, q := range queued {
			if q.Point != event.PointSYN || q.SYN.Outcome != event.SYNQueued || q.SYN.Listener.String() != "10.0.0.2:80" {
				t.Errorf("%s: queued event %+v", tt.name, q.SYN)
			}
		}
	}
}

// A SYN is judged once events Grace younger than it were read, however
// late the reader reads them; flush judges every SYN.
func TestExpireWaitsOnKernelTime(t *testing.T) {
	syn := synAt(event.HookInput, "10.0.0.1", 5000, "10.0.0.2", 80, tcpSYN)
	syn.Time = uint64(10 * time.Second)
	tests := []struct {
		name        string
		readTo      uint64
		flush       bool
		wantPending int
	}{
		{"read to the SYN", syn.Time, false, 1},
		{"read to just under the grace", syn.Time + uint64(Grace) - 1, false, 1},
		{"read past the grace", syn.Time + uint64(Grace), false, 0},
		{"flushed", syn.Time, true, 0},
	}
	for _, tt := range tests {
		w := New([]netns.Target{{Path: "/nonexistent", Inode: 42}})
		emit := func(e *event.Event) { t.Errorf("%s: judged %+v without a listener", tt.name, e.SYN) }
		w.Observe(syn, emit)
		w.Expire(tt.readTo, tt.flush, emit)
		if len(w.pending) != tt.wantPending {
			t.Errorf("%s: %d pending, want %d", tt.name, len(w.pending), tt.wantPending)
		}
	}
}

// sock_diag lists an IPv4 listener's address in 16 bytes (net.IPv4) and
// a dual-stack one as [::]: both take a SYN to an IPv4 address, the one
// bound to the address first.
func TestFindListener(t *testing.T) {
	listener := func(family uint8, ip net.IP, port uint16) *netlink.Socket {
		return &netlink.Socket{Family: family, ID: netlink.SocketID{Source: ip, SourcePort: port}}
	}
	wild4 := listener(unix.AF_INET, net.IPv4zero, 8080)
	bound4 := listener(unix.AF_INET, net.IPv4(10, 244, 1, 2), 8080)
	dual := listener(unix.AF_INET6, net.IPv6unspecified, 9090)
	bound6 := listener(unix.AF_INET6, net.ParseIP("fd00::2"), 9090)
	all := []*netlink.Socket{wild4, bound4, dual, bound6}
	for _, c := range []struct {
		name string
		ls   []*netlink.Socket
		dst  string
		want *netlink.Socket
	}{
		{"an IPv4 listener on every address", []*netlink.Socket{wild4}, "10.244.1.2:8080", wild4},
		{"the one bound to the address first", all, "10.244.1.2:8080", bound4},
		{"another address: the one on every address", all, "10.244.1.9:8080", wild4},
		{"[::] takes IPv4", all, "10.244.1.2:9090", dual},
		{"an IPv6 address bound", all, "[fd00::2]:9090", bound6},
		{"0.0.0.0 does not take IPv6", []*netlink.Socket{wild4}, "[fd00::2]:8080", nil},
		{"another port", all, "10.244.1.2:7070", nil},
	} {
		dst := netip.MustParseAddrPort(c.dst)
		got, ok := findListener(c.ls, dst.Addr(), dst.Port())
		if got != c.want || ok != (c.want != nil) {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, ok, c.want)
		}
	}
}
