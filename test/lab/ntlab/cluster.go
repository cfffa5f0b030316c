package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nettrace-dev/nettrace/test/cluster"
)

// clusterCmd is `ntlab cluster up|down`: the real Kubernetes cluster of
// package cluster.
func clusterCmd(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("cluster: want up or down")
	}
	switch args[0] {
	case "down":
		return cluster.Down()
	case "up":
	default:
		return fmt.Errorf("cluster: unknown command %q (want up or down)", args[0])
	}
	fs := flag.NewFlagSet("cluster up", flag.ExitOnError)
	mode := fs.String("proxy-mode", string(cluster.IPTables), "kube-proxy's mode: iptables or nftables")
	kube := fs.String("kube-bin", ".cache/kube/bin", "directory of the Kubernetes components (make kube)")
	flanneld := fs.String("flanneld", "bin/flanneld", "flanneld (make flanneld)")
	cni := fs.String("flannel-cni", ".cache/cni/flannel", "flannel's CNI plugin (make kube)")
	noCIDR := fs.Bool("proxy-without-cluster-cidr", false, "run kube-proxy without the pods' CIDR (it then masquerades no node traffic)")
	fs.Parse(args[1:])
	if *mode != string(cluster.IPTables) && *mode != string(cluster.NFTables) {
		return fmt.Errorf("cluster: --proxy-mode %q: want iptables or nftables", *mode)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	b := cluster.Binaries{Kube: abs(*kube), Flanneld: abs(*flanneld), FlannelCNI: abs(*cni), Lab: self}
	if err := cluster.Up(b, cluster.Options{ProxyMode: cluster.ProxyMode(*mode), NoProxyClusterCIDR: *noCIDR}); err != nil {
		return fmt.Errorf("%w\n(the components' logs are in %s/logs; ntlab cluster down removes the cluster)", err, cluster.StateDir)
	}
	fmt.Printf("cluster up: nodes node-1 and node-2, kube-proxy in %s mode\nkubeconfig: %s\n", *mode, cluster.Kubeconfig)
	return nil
}
