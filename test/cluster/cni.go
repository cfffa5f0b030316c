package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// NetworkName is the nodes' CNI network, as kube-flannel names it.
const NetworkName = "cbr0"

// conflistPath is node n's CNI configuration, kube-flannel's
// cni-conf.json: the flannel plugin reads flanneld's subnet file and
// delegates to the bridge plugin, hairpin mode on; portmap gives pods
// their hostPorts.
func conflistPath(n Node) string { return filepath.Join(n.dir(), "net.d", "10-flannel.conflist") }

// writeConflist writes node n's CNI configuration for network name. It
// is renamed into place, so that the runtime, which watches the
// directory, never loads half of it.
func writeConflist(n Node, name string) error {
	conflist := fmt.Sprintf(`{"name": %q, "cniVersion": "0.3.1", "plugins": [
	{"type": "flannel", "delegate": {"hairpinMode": true, "isDefaultGateway": true}},
	{"type": "portmap", "capabilities": {"portMappings": true}}]}`, name)
	path := conflistPath(n)
	if err := writeFile(path+".new", conflist); err != nil {
		return err
	}
	return os.Rename(path+".new", path)
}

// RenameNetwork renames node n's CNI network, as an upgrade or migration
// of a network plugin does, and returns once the node's containerd has
// loaded the renamed configuration. A sandbox set up under the old name
// is then torn down under the new one, which its portmap chains (named
// from the network's name and the sandbox's) and host-local's addresses
// (kept per network) are not found under: they stay.
func RenameNetwork(n Node, name string) error {
	if err := writeConflist(n, name); err != nil {
		return err
	}
	return waitFor(n.Name+"'s containerd to load network "+name, func() error {
		loaded, err := cniConfig(n)
		if err != nil {
			return err
		}
		if !strings.Contains(loaded, fmt.Sprintf(`"Name":%q`, name)) {
			return fmt.Errorf("network %s not loaded: %s", name, loaded)
		}
		return nil
	})
}

// cniConfig is the CNI configuration node n's containerd has loaded, as
// its CRI status tells it (verbose: "cniconfig").
func cniConfig(n Node) (string, error) {
	conn, err := grpc.NewClient("unix://"+n.containerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := runtime.NewRuntimeServiceClient(conn).Status(ctx, &runtime.StatusRequest{Verbose: true})
	if err != nil {
		return "", fmt.Errorf("CRI status of %s: %w", n.Name, err)
	}
	return st.Info["cniconfig"], nil
}
