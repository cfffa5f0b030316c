package cluster

import (
	"fmt"
	"strings"
)

// ContainerdConfig is a configuration of Debian's containerd with its CRI
// plugin, as a node's runtime for the kubelet, everything in places of
// its own so that several run on one machine (the cluster's nodes, and the
// tests that call the CRI plugin themselves).
type ContainerdConfig struct {
	Root, State, Socket string
	Opt                 string // the opt plugin's directory (default /opt/containerd)
	SandboxImage        string
	CNIBinDir           string
	CNIConfDir          string
	RuncRoot            string // runc's state; runc's default when empty
}

// TOML is the configuration file's text (version 2, containerd 1.6).
func (c ContainerdConfig) TOML() string {
	var b strings.Builder
	fmt.Fprintf(&b, `version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Our machines' root may not lower an OOM score (no CAP_SYS_RESOURCE):
  # a sandbox keeps containerd's own, as rootless setups do.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
`, c.Root, c.State, c.Socket, c.Opt, c.SandboxImage, c.CNIBinDir, c.CNIConfDir)
	if c.RuncRoot != "" {
		fmt.Fprintf(&b, "  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n    Root = %q\n", c.RuncRoot)
	}
	return b.String()
}
