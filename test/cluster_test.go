package test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nettrace-dev/nettrace/test/cluster"
)

// clusterUsed says that this run brought a cluster up (TestMain removes
// it then, whatever the tests did).
var clusterUsed bool

// clusterBinaries are the cluster's programs: CLUSTER_KUBE_BIN and the like
// where set, else what `make kube`, `make flanneld` and the test's own
// build made.
func clusterBinaries(t *testing.T) cluster.Binaries {
	t.Helper()
	env := func(key, def string) string {
		if v := os.Getenv(key); v != "" {
			return v
		}
		abs, _ := filepath.Abs(def)
		return abs
	}
	return cluster.Binaries{
		Kube:       env("CLUSTER_KUBE_BIN", "../.cache/kube/bin"),
		Flanneld:   env("FLANNELD_BIN", "../bin/flanneld"),
		FlannelCNI: env("CLUSTER_FLANNEL_CNI", "../.cache/cni/flannel"),
		Lab:        labBin,
	}
}

// upCluster brings the cluster up for the test, and at its end removes
// it and requires that nothing of it is left on the host, also when the
// test failed; a failing test shows the components' logs' ends first.
func upCluster(t *testing.T, o cluster.Options) *kubernetes.Clientset {
	t.Helper()
	clusterUsed = true
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"kube-apiserver", "node-1-kubelet", "node-2-kubelet", "node-1-flanneld", "node-2-flanneld", "node-1-kube-proxy", "node-1-containerd"} {
				t.Logf("%s's log (its end):\n%s", name, cluster.LogTail(name, 15))
			}
			for _, n := range cluster.AllNodes() {
				t.Logf("%s's pods' logs (their ends):\n%s", n.Name, cluster.PodLogs(n))
			}
		}
		if err := cluster.Down(); err != nil {
			t.Errorf("cluster down: %v", err)
		}
		requireNoClusterResidue(t)
	})
	if err := cluster.Up(clusterBinaries(t), o); err != nil {
		t.Fatal(err)
	}
	client, err := cluster.Client(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// requireNoClusterResidue: no namespace, process, cgroup, veth or state
// of the cluster's is left on the host.
func requireNoClusterResidue(t *testing.T) {
	t.Helper()
	if ns := cluster.Namespaces(); len(ns) > 0 {
		t.Errorf("namespaces left: %v", ns)
	}
	if _, err := os.Stat(cluster.StateDir); !os.IsNotExist(err) {
		t.Errorf("%s left (%v)", cluster.StateDir, err)
	}
	if out, _ := exec.Command("ip", "-o", "link", "show").Output(); strings.Contains(string(out), cluster.Prefix) {
		t.Errorf("host links left:\n%s", out)
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/" + cluster.Prefix + "*")
	if len(cgroups) > 0 {
		t.Errorf("cgroups left: %v", cgroups)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "NETTRACE_CLUSTER=") {
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			t.Errorf("process left: %s %s", filepath.Dir(p), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}

// labPod is a pod of the lab's image on node, serving its name on port
// (`ntlab serve`, with serveArgs added).
func labPod(namespace, name, node string, port int32, labels map[string]string, serveArgs ...string) *corev1.Pod {
	no := false
	// Ready once it listens, as netstat in the pod sees it: a TCP probe
	// would take a place in the accept queue of a server that does not
	// accept.
	listening := fmt.Sprintf("/bin/busybox netstat -ltn | /bin/busybox grep -q ':%d '", port)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{
				Name: "serve", Image: cluster.LabImage, ImagePullPolicy: corev1.PullNever,
				Args:  append([]string{"serve", "--addr", fmt.Sprintf("0.0.0.0:%d", port), "--name", name}, serveArgs...),
				Ports: []corev1.ContainerPort{{ContainerPort: port, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"/bin/busybox", "sh", "-c", listening}}}},
			}},
		},
	}
}

// waitServing waits until the Service's EndpointSlices hold n ready
// endpoints.
func waitServing(t *testing.T, client kubernetes.Interface, namespace, service string, n int) {
	t.Helper()
	ctx := context.Background()
	var ready int
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(200 * time.Millisecond) {
		slices, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err == nil {
			ready = 0
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready {
						ready++
					}
				}
			}
			if ready >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			pods, _ := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			var states []string
			for _, p := range pods.Items {
				states = append(states, fmt.Sprintf("%s on %s: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses))
			}
			t.Fatalf("Service %s/%s has %d ready endpoints after %s, want %d (%v); pods: %s", namespace, service, ready, cluster.Patience, n, err, strings.Join(states, "; "))
		}
	}
}

// askName connects to addr from namespace ns and returns the name the
// server answered with.
func askName(t *testing.T, ns, addr string) (string, error) {
	t.Helper()
	var name string
	var askErr error
	inNetns(t, ns, func() error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			askErr = err
			return nil
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		name, askErr = bufio.NewReader(c).ReadString('\n')
		name = strings.TrimSpace(name)
		return nil
	})
	return name, askErr
}

// TestClusterUp: the cluster comes up with both nodes Ready, a pod made
// through the API on node 2 answers through its Service's cluster IP from
// node 1 (kube-proxy's DNAT, flannel's vxlan), and nothing of the cluster
// is left on the host afterwards.
func TestClusterUp(t *testing.T) {
	client := upCluster(t, cluster.Options{})
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	if _, err := client.CoreV1().Pods("default").Create(ctx, labPod("default", "web-1", "node-2", 8080, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitServing(t, client, "default", "web", 1)
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	var name string
	// kube-proxy writes the Service's rules once it sees the slice: ask
	// until it has.
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(500 * time.Millisecond) {
		if name, err = askName(t, cluster.NodeAt(1).Netns, addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || name != "web-1" {
		t.Fatalf("asked %s from node-1: %q, %v; want web-1", addr, name, err)
	}
	t.Logf("node-1 -> %s (Service default/web) answered by %s on node-2", addr, name)
}

// The pods' image has no C library: Up refuses a dynamically linked ntlab
// with the reason, before it makes anything.
func TestClusterRefusesDynamicLab(t *testing.T) {
	dynamic := filepath.Join(t.TempDir(), "ntlab")
	build := exec.Command("go", "build", "-o", dynamic, "./lab/ntlab")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b := clusterBinaries(t)
	b.Lab = dynamic
	err := cluster.Up(b, cluster.Options{})
	if err == nil || !strings.Contains(err.Error(), "linked dynamically") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("Up with a dynamic ntlab: %v, want a refusal that says to build it with CGO_ENABLED=0", err)
	}
	requireNoClusterResidue(t)
}

// nettraceKubeconfig applies deploy/'s ServiceAccount, ClusterRole and
// binding to the cluster, and writes a kubeconfig with a token of that
// ServiceAccount: nettrace then reads the API with the privileges the
// DaemonSet gives it, and no more.
func nettraceKubeconfig(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	text, err := os.ReadFile("../deploy/nettrace-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(text), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("deploy/nettrace-daemonset.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("apply %T: %v", obj, err)
		}
	}
	hour := int64(3600)
	tok, err := client.CoreV1().ServiceAccounts("nettrace").CreateToken(ctx, "nettrace",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount nettrace/nettrace: %v", err)
	}
	admin, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	server := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lab"] = server
	cfg.AuthInfos["nettrace"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "nettrace"}
	cfg.CurrentContext = "lab"
	path := filepath.Join(t.TempDir(), "nettrace.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
