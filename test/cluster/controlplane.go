package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func pkiPath(name string) string { return filepath.Join(StateDir, "pki", name) }

func kubeconfigPath(name string) string { return filepath.Join(StateDir, name+".kubeconfig") }

// clients are the components' identities, each a client certificate and a
// kubeconfig: the bootstrap RBAC bindings know the components' users
// (system:kube-controller-manager, system:kube-scheduler, system:kube-proxy,
// system:node:NAME through the Node authorizer); flannel's is kube-flannel's
// ClusterRole, which Up binds; admin is system:masters.
func clients() map[string]clientIdentity {
	local, underlayAPI := "https://127.0.0.1:6443", "https://"+APIServerIP+":6443"
	out := map[string]clientIdentity{
		"admin":                   {identity{"nettrace-admin", []string{"system:masters"}}, "https://" + HostAPIServerIP + ":6443"},
		"kube-controller-manager": {identity{"system:kube-controller-manager", nil}, local},
		"kube-scheduler":          {identity{"system:kube-scheduler", nil}, local},
		"kube-proxy":              {identity{"system:kube-proxy", nil}, underlayAPI},
		"flannel":                 {identity{"flannel", nil}, underlayAPI},
	}
	for _, n := range AllNodes() {
		out[n.Name+"-kubelet"] = clientIdentity{identity{"system:node:" + n.Name, []string{"system:nodes"}}, underlayAPI}
	}
	return out
}

// clientIdentity is a component's certificate subject and the API
// server's address as that component reaches it.
type clientIdentity struct {
	id     identity
	server string
}

// makePKI writes the CA, the API server's serving certificate and every
// client's certificate and kubeconfig.
func makePKI() error {
	ca, err := newAuthority(pkiPath(""))
	if err != nil {
		return err
	}
	err = ca.issue("apiserver", identity{user: "kube-apiserver"},
		[]string{HostAPIServerIP, APIServerIP, KubernetesServiceIP, "127.0.0.1"},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	for name, c := range clients() {
		if err := ca.issue(name, c.id, nil, nil); err != nil {
			return err
		}
		if err := writeKubeconfig(name, c.server); err != nil {
			return err
		}
	}
	return nil
}

func writeKubeconfig(name, server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nettrace"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: pkiPath("ca.crt")}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: pkiPath(name + ".crt"), ClientKey: pkiPath(name + ".key")}
	cfg.Contexts["nettrace"] = &clientcmdapi.Context{Cluster: "nettrace", AuthInfo: name}
	cfg.CurrentContext = "nettrace"
	return clientcmd.WriteToFile(*cfg, kubeconfigPath(name))
}

// Client is the host's clientset for a kubeconfig (the administrator's:
// Kubeconfig). Its connections are bound to the host's veth to the control
// plane: were the cluster gone, its address would otherwise be routed by
// the host's default route, off this machine.
func Client(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var bindErr error
		if err := c.Control(func(fd uintptr) {
			bindErr = syscall.SetsockoptString(int(fd), syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, hostAPILink)
		}); err != nil {
			return err
		}
		if bindErr != nil {
			return fmt.Errorf("the host's link to the API server, %s: %w (is the cluster up?)", hostAPILink, bindErr)
		}
		return nil
	}}
	cfg.Dial = d.DialContext
	return kubernetes.NewForConfig(cfg)
}

// startControlPlane runs etcd (Debian's), kube-apiserver,
// kube-controller-manager and kube-scheduler in the control plane's
// namespace, and returns once the API server is ready.
func startControlPlane(b Binaries) error {
	cp := place{netns: ControlPlane}
	_, err := start("etcd", cp, nil, "etcd", "--name", "ntkube", "--data-dir", filepath.Join(StateDir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "ntkube=http://127.0.0.1:2380", "--log-level", "warn")
	if err != nil {
		return err
	}
	_, err = start("kube-apiserver", cp, nil, b.kube("kube-apiserver"),
		"--etcd-servers", "http://127.0.0.1:2379",
		"--advertise-address", APIServerIP, "--bind-address", "0.0.0.0", "--secure-port", "6443",
		"--service-cluster-ip-range", ServiceCIDR,
		"--tls-cert-file", pkiPath("apiserver.crt"), "--tls-private-key-file", pkiPath("apiserver.key"),
		"--client-ca-file", pkiPath("ca.crt"),
		"--kubelet-client-certificate", pkiPath("admin.crt"), "--kubelet-client-key", pkiPath("admin.key"),
		// Logs, exec and cp reach a kubelet at its node's address: its
		// name would be looked up in DNS, which the lab has none of.
		"--kubelet-preferred-address-types", "InternalIP",
		"--service-account-key-file", pkiPath("sa.pub"), "--service-account-signing-key-file", pkiPath("sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--allow-privileged", "--v", "1")
	if err != nil {
		return err
	}
	client, err := Client(kubeconfigPath("admin"))
	if err != nil {
		return err
	}
	err = waitFor("the API server ready", func() error {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err != nil && !alive("kube-apiserver") {
			return exited("kube-apiserver")
		}
		return err
	})
	if err != nil {
		return err
	}
	_, err = start("kube-controller-manager", cp, nil, b.kube("kube-controller-manager"),
		"--kubeconfig", kubeconfigPath("kube-controller-manager"),
		"--authentication-kubeconfig", kubeconfigPath("kube-controller-manager"),
		"--authorization-kubeconfig", kubeconfigPath("kube-controller-manager"),
		"--bind-address", "127.0.0.1", "--leader-elect=false", "--use-service-account-credentials",
		"--service-account-private-key-file", pkiPath("sa.key"), "--root-ca-file", pkiPath("ca.crt"),
		"--allocate-node-cidrs", "--cluster-cidr", ClusterCIDR, "--node-cidr-mask-size", "24",
		"--service-cluster-ip-range", ServiceCIDR, "--v", "1")
	if err != nil {
		return err
	}
	_, err = start("kube-scheduler", cp, nil, b.kube("kube-scheduler"),
		"--kubeconfig", kubeconfigPath("kube-scheduler"),
		"--authentication-kubeconfig", kubeconfigPath("kube-scheduler"),
		"--authorization-kubeconfig", kubeconfigPath("kube-scheduler"),
		"--bind-address", "127.0.0.1", "--leader-elect=false", "--v", "1")
	return err
}
