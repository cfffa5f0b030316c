package cluster

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nettrace-dev/nettrace/test/image"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// Up brings the cluster up (after removing any cluster up): its network,
// PKI, control plane and nodes, and returns once both nodes are Ready and
// the default ServiceAccount exists, so that pods can be made. On an error
// the cluster is left as it is, for its logs (StateDir/logs); Down removes
// it.
func Up(b Binaries, o Options) error {
	if o.ProxyMode == "" {
		o.ProxyMode = IPTables
	}
	if err := check(b); err != nil {
		return err
	}
	if err := Down(); err != nil {
		return fmt.Errorf("removing the cluster up before: %w", err)
	}
	if err := os.MkdirAll(pkiPath(""), 0o700); err != nil {
		return err
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"PKI", makePKI},
		{"network", makeNetwork},
		{"CNI plugins", func() error { return linkCNIPlugins(b) }},
		{"images", func() error { return writeImages(b) }},
		{"control plane", func() error { return startControlPlane(b) }},
		{"nodes", func() error { return startNodes(b, o) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("cluster %s: %w", s.what, err)
		}
	}
	return nil
}

// check says what is missing before anything is made.
func check(b Binaries) error {
	var errs []error
	for _, p := range []string{b.kube("kube-apiserver"), b.kube("kube-controller-manager"), b.kube("kube-scheduler"),
		b.kube("kubelet"), b.kube("kube-proxy"), b.Flanneld, b.FlannelCNI, b.Lab} {
		if _, err := os.Stat(p); err != nil {
			errs = append(errs, fmt.Errorf("needs %s (make kube builds the Kubernetes components and flannel's CNI plugin, make flanneld flanneld, make build ntlab)", p))
		}
	}
	if err := static(b.Lab); err != nil {
		errs = append(errs, err)
	}
	for _, tool := range []string{"etcd", "containerd", "containerd-shim-runc-v2", "runc", "ctr", "unshare", "nsenter", "iptables", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			errs = append(errs, fmt.Errorf("needs %s (make deps installs it from Debian)", tool))
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(lab.CNIPluginDir, p)); err != nil {
			errs = append(errs, fmt.Errorf("needs the CNI plugin %s (Debian's containernetworking-plugins)", p))
		}
	}
	return errors.Join(errs...)
}

// static says why the pods' image cannot run the binary at path: the
// image holds no dynamic loader or C library.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return nil // missing: said above
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically, and the pods' image has no C library: build it with CGO_ENABLED=0 (make build does)", path)
		}
	}
	return nil
}

// linkCNIPlugins makes the nodes' CNI plugin directory: Debian's plugins
// and flannel's, linked.
func linkCNIPlugins(b Binaries) error {
	if err := os.MkdirAll(cniBinDir(), 0o755); err != nil {
		return err
	}
	plugins, err := filepath.Glob(filepath.Join(lab.CNIPluginDir, "*"))
	if err != nil {
		return err
	}
	flannel, err := filepath.Abs(b.FlannelCNI)
	if err != nil {
		return err
	}
	for _, p := range append(plugins, flannel) {
		if err := os.Symlink(p, filepath.Join(cniBinDir(), filepath.Base(p))); err != nil {
			return err
		}
	}
	return nil
}

func imageArchive(name string) string { return filepath.Join(StateDir, "images", name+".tar") }

// writeImages writes the pods' images: the sandbox (busybox sleeping) and
// the lab's (ntlab, which serves and calls, and busybox).
func writeImages(b Binaries) error {
	if err := os.MkdirAll(filepath.Join(StateDir, "images"), 0o755); err != nil {
		return err
	}
	if err := image.Write(imageArchive("pause"), image.Image{Name: PauseImage,
		Files: map[string]string{"bin/busybox": "/bin/busybox"}, Entrypoint: []string{"/bin/busybox", "sleep", "2147483647"}}); err != nil {
		return err
	}
	return image.Write(imageArchive("ntlab"), image.Image{Name: LabImage,
		Files:      map[string]string{"bin/busybox": "/bin/busybox", "bin/ntlab": b.Lab},
		Entrypoint: []string{"/bin/ntlab"}})
}

// startNodes starts each node's containerd (its images imported) and
// kubelet, then, once the controller manager gave the Node a pod CIDR,
// flanneld and kube-proxy; it returns when every node is Ready.
func startNodes(b Binaries, o Options) error {
	client, err := Client(Kubeconfig)
	if err != nil {
		return err
	}
	if err := bindFlannel(client); err != nil {
		return err
	}
	holders := map[string]int{}
	for _, n := range AllNodes() {
		if err := makeCgroupRoot(n); err != nil {
			return err
		}
		holder, err := startHolder(n)
		if err != nil {
			return err
		}
		holders[n.Name] = holder
		if err := startContainerd(n, holder); err != nil {
			return err
		}
		for _, img := range []string{"pause", "ntlab"} {
			if err := importImage(n, imageArchive(img)); err != nil {
				return err
			}
		}
		if err := startKubelet(n, b, holder); err != nil {
			return err
		}
	}
	for _, n := range AllNodes() {
		err := waitFor(n.Name+"'s pod CIDR", func() error {
			node, err := client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
			if err == nil && node.Spec.PodCIDR == "" {
				err = errors.New("none yet")
			}
			if err != nil && !alive(n.Name+"-kubelet") {
				return exited(n.Name + "-kubelet")
			}
			return err
		})
		if err != nil {
			return err
		}
		if err := startFlanneld(n, b, holders[n.Name]); err != nil {
			return err
		}
		if err := startKubeProxy(n, b, holders[n.Name], o); err != nil {
			return err
		}
	}
	for _, n := range AllNodes() {
		if err := waitFor(n.Name+" Ready", func() error { return nodeReady(client, n) }); err != nil {
			return err
		}
	}
	return waitFor("the default ServiceAccount", func() error {
		_, err := client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
}

func nodeReady(client kubernetes.Interface, n Node) error {
	node, err := client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("%s: %s", c.Reason, c.Message)
		}
	}
	return errors.New("no Ready condition yet")
}

// bindFlannel grants flanneld kube-flannel.yml's ClusterRole: read pods and
// nodes, patch the nodes' status (its VTEP annotations).
func bindFlannel(client kubernetes.Interface) error {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "flannel"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	}}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flannel"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flannel"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "flannel"}}}
	_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	return err
}
