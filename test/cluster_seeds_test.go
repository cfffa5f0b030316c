package test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/cluster"
)

// clusterService makes, through the API, namespace ns, a pod of the lab's
// image on node serving port 8080, and Service name (port 80, "http") in
// front of it; it returns once the Service has the pod as a ready
// endpoint, with the Service's cluster IP and the pod's address.
func clusterService(t *testing.T, client kubernetes.Interface, ns, name, pod, node string) (clusterIP, podIP string) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": name}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, labPod(ns, pod, node, 8080, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitServing(t, client, ns, name, 1)
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP, p.Status.PodIP
}

// waitAnswered asks addr from namespace ns until the pod answers
// (kube-proxy writes a Service's rules once it sees its EndpointSlice).
func waitAnswered(t *testing.T, ns, addr, want string) {
	t.Helper()
	var name string
	var err error
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(500 * time.Millisecond) {
		if name, err = askName(t, ns, addr); (err == nil && name == want) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || name != want {
		t.Fatalf("asked %s from %s: %q, %v; want %s", addr, ns, name, err, want)
	}
}

// TestClusterSeedSNATMissing is incident 000 on the real cluster: kube-proxy
// runs without the cluster's pod CIDR (so it marks no node traffic for
// masquerading), a process on node-1 connects to Service shop/web's cluster
// IP, whose pod is on node-2; OUTPUT's DNAT re-routes the SYN into
// flannel.1. In the incident a stale RETURN for node-2's lease sits in
// flanneld's chain ahead of its MASQUERADE (an old flanneld's, killed before
// its cleanup): the SYN leaves unSNATed, the pod answers over the
// underlay, and node-1's strict rp_filter drops the reply. The twin is the
// chain as flanneld wrote it: masqueraded, answered through the tunnel, no
// finding.
func TestClusterSeedSNATMissing(t *testing.T) {
	client := upCluster(t, cluster.Options{NoProxyClusterCIDR: true})
	node1, node2 := cluster.NodeAt(1), cluster.NodeAt(2)
	clusterIP, podIP := clusterService(t, client, "shop", "web", "web-5d8c", node2.Name)
	addr := net.JoinHostPort(clusterIP, "80")
	waitAnswered(t, node1.Netns, addr, "web-5d8c")
	n2, err := client.CoreV1().Nodes().Get(context.Background(), node2.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	script(t, "ip netns exec "+node1.Netns+" sysctl -qw net.ipv4.conf.all.rp_filter=1 net.ipv4.conf.eth0.rp_filter=1")
	stale := []string{"!", "-s", cluster.ClusterCIDR, "-d", n2.Spec.PodCIDR, "-m", "comment", "--comment", "flanneld masq", "-j", "RETURN"}
	for _, fault := range []bool{false, true} {
		t.Run(map[bool]string{true: "stale", false: "healthy"}[fault], func(t *testing.T) {
			if fault {
				// Ahead of flanneld's two MASQUERADE rules, the chain's
				// last.
				sh(t, append([]string{"ip", "netns", "exec", node1.Netns, "iptables", "-t", "nat", "-I", "FLANNEL-POSTRTG", "5"}, stale...)...)
				t.Cleanup(func() {
					sh(t, append([]string{"ip", "netns", "exec", node1.Netns, "iptables", "-t", "nat", "-D", "FLANNEL-POSTRTG"}, stale...)...)
				})
			}
			recording := filepath.Join(t.TempDir(), "seed-000.ntrace")
			w := startWatch(t, "-w", recording, "--netns", "all", "host "+clusterIP)
			err := dial(t, node1.Netns, "", addr, 4*time.Second)
			tr := w.stop(t)
			x, ok := twinFinding(t, tr, err, fault, "snat-missing-on-tunnel")
			if !ok {
				return
			}
			for _, want := range []string{"DNATed to " + podIP + ":8080", "flannel.1", "IP_RPFILTER"} {
				if !strings.Contains(x.Summary, want) {
					t.Errorf("the finding does not say %q: %s", want, x.Summary)
				}
			}
			namedService(t, x, output.JSONService{Namespace: "shop", Name: "web", Port: "http", Address: "cluster IP"})
			requireSameReplay(t, recording, tr)
			t.Log(x.Summary)
		})
	}
}
