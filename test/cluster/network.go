package cluster

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// run runs commands in order, the first failure returned with its output.
func run(cmds ...[]string) error {
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

func ipn(ns string, args ...string) []string { return append([]string{"ip", "-n", ns}, args...) }

func sysctl(ns, assignment string) []string {
	return []string{"ip", "netns", "exec", ns, "sysctl", "-qw", assignment}
}

// makeNetwork makes the namespaces and links: the Underlay's bridge with
// the control plane and each node on it (eth0), the nodes' default route
// through the Underlay's own address, and the host's veth to the control
// plane. Nothing links the host's own interfaces to any of it, and the
// control plane does not forward: the host reaches the API server and
// nothing else.
func makeNetwork() error {
	cmds := [][]string{
		{"ip", "netns", "add", Underlay},
		ipn(Underlay, "link", "set", "lo", "up"),
		ipn(Underlay, "link", "add", "br0", "type", "bridge"),
		ipn(Underlay, "addr", "add", RouterIP+"/24", "dev", "br0"),
		ipn(Underlay, "link", "set", "br0", "up"),
	}
	attach := func(ns, port, ip string) {
		cmds = append(cmds,
			[]string{"ip", "netns", "add", ns},
			ipn(ns, "link", "set", "lo", "up"),
			ipn(ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", Underlay),
			ipn(ns, "addr", "add", ip+"/24", "dev", "eth0"),
			ipn(ns, "link", "set", "eth0", "up"),
			ipn(Underlay, "link", "set", port, "master", "br0", "up"),
		)
	}
	attach(ControlPlane, "cp", APIServerIP)
	cmds = append(cmds,
		[]string{"ip", "link", "add", hostAPILink, "type", "veth", "peer", "name", "host0", "netns", ControlPlane},
		[]string{"ip", "addr", "add", hostLinkIP + "/30", "dev", hostAPILink},
		[]string{"ip", "link", "set", hostAPILink, "up"},
		ipn(ControlPlane, "addr", "add", HostAPIServerIP+"/30", "dev", "host0"),
		ipn(ControlPlane, "link", "set", "host0", "up"),
		sysctl(ControlPlane, "net.ipv4.ip_forward=0"),
	)
	for _, n := range AllNodes() {
		attach(n.Netns, n.Name, n.IP)
		cmds = append(cmds,
			ipn(n.Netns, "route", "add", "default", "via", RouterIP),
			sysctl(n.Netns, "net.ipv4.ip_forward=1"),
			// Bridged pod-to-pod packets pass iptables, as kubeadm's
			// prerequisites have it: kube-proxy's rules see them.
			sysctl(n.Netns, "net.bridge.bridge-nf-call-iptables=1"),
		)
	}
	return run(cmds...)
}
