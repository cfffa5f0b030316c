package test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/cluster"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// seedService is a seed's Service: a pod of the lab's image serving port
// 8080 on a node (serveArgs added to its `ntlab serve`), more where
// others says, and the Service (port 80, named "http") in front of them.
type seedService struct {
	namespace, name, pod, node string
	serveArgs                  []string
	kind                       corev1.ServiceType // ClusterIP when empty
	local                      bool               // externalTrafficPolicy: Local
	others                     map[string]string  // more pods: name -> node
}

// make makes the namespace, pods and Service through the API and returns
// once the Service has every pod as a ready endpoint: the Service as the
// API has it, and the first pod's address.
func (s seedService) make(t *testing.T, client kubernetes.Interface) (*corev1.Service, string) {
	t.Helper()
	ctx := context.Background()
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	labels := map[string]string{"app": s.name}
	pods := map[string]string{s.pod: s.node}
	for name, node := range s.others {
		pods[name] = node
	}
	for name, node := range pods {
		if _, err := client.CoreV1().Pods(s.namespace).Create(ctx, labPod(s.namespace, name, node, 8080, labels, s.serveArgs...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := client.CoreV1().Services(s.namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Spec: corev1.ServiceSpec{Type: s.kind, Selector: labels, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		if svc, err = client.CoreV1().Services(s.namespace).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitServing(t, client, s.namespace, s.name, len(pods))
	p, err := client.CoreV1().Pods(s.namespace).Get(ctx, s.pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc, p.Status.PodIP
}

// waitAnswered asks addr from namespace ns until pod want answers (any
// pod when want is empty)
// (kube-proxy writes a Service's rules once it sees its EndpointSlice).
func waitAnswered(t *testing.T, ns, addr, want string) {
	t.Helper()
	var name string
	var err error
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(500 * time.Millisecond) {
		if name, err = askName(t, ns, addr); (err == nil && (name == want || want == "" && name != "")) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || name == "" || want != "" && name != want {
		t.Fatalf("asked %s from %s: %q, %v; want %q", addr, ns, name, err, want)
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
	kubeconfig := nettraceKubeconfig(t, client)
	node1, node2 := cluster.NodeAt(1), cluster.NodeAt(2)
	svc, podIP := seedService{namespace: "shop", name: "web", pod: "web-5d8c", node: node2.Name}.make(t, client)
	clusterIP := svc.Spec.ClusterIP
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
			w := startWatch(t, "-w", recording, "--netns", "all", "--kubeconfig", kubeconfig, "host "+clusterIP)
			err := dial(t, node1.Netns, "", addr, 4*time.Second)
			tr := w.stop(t)
			x, ok := twinFinding(t, tr, err, fault, "snat-missing-on-tunnel")
			if !ok {
				return
			}
			// The pod and the node as the API names them: no file on the
			// host names either.
			for _, want := range []string{"DNATed to " + podIP + ":8080 (pod shop/web-5d8c)", " (node " + node1.Name + ") -> ", "flannel.1", "IP_RPFILTER"} {
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

// TestClusterSeedSYNDropped is incident 001 on the real cluster: clients
// outside the cluster (the underlay's own address) call Service
// default/echo's node port on node-1 all at once; kube-proxy DNATs them to
// the pod on node-2, whose server listens with a backlog of 1 and does
// not accept, so SYNs are dropped at the listener and the clients time
// out. The twin's server accepts: every client connects, no finding.
func TestClusterSeedSYNDropped(t *testing.T) {
	client := upCluster(t, cluster.Options{})
	kubeconfig := nettraceKubeconfig(t, client)
	node1, node2 := cluster.NodeAt(1), cluster.NodeAt(2)
	for _, fault := range []bool{false, true} {
		t.Run(map[bool]string{true: "full", false: "healthy"}[fault], func(t *testing.T) {
			s := seedService{namespace: "twin", name: "echo", pod: "echo-healthy", node: node2.Name, kind: corev1.ServiceTypeNodePort}
			if fault {
				s.namespace, s.pod, s.serveArgs = "default", "echo-7c9f", []string{"--backlog", "1", "--no-accept"}
			}
			svc, podIP := s.make(t, client)
			nodePort := fmt.Sprint(svc.Spec.Ports[0].NodePort)
			target := net.JoinHostPort(node1.IP, nodePort)
			if !fault {
				waitAnswered(t, cluster.Underlay, target, s.pod)
			} else {
				waitListed(t, node1.Netns, "--dport "+nodePort+" ", s.namespace+"/"+s.name)
			}
			recording := filepath.Join(t.TempDir(), "seed-001.ntrace")
			w := startWatch(t, "-w", recording, "--netns", "all", "--kubeconfig", kubeconfig, "port "+nodePort)
			errs := dialAll(t, cluster.Underlay, target, 8, 3*time.Second)
			tr := w.stop(t)
			var failed int
			for _, err := range errs {
				if err != nil {
					failed++
				}
			}
			if !fault {
				if failed > 0 || len(tr.explanations) > 0 {
					t.Fatalf("healthy twin: %d of 8 clients failed (%v); findings %+v", failed, errs, tr.explanations)
				}
				return
			}
			if failed == 0 {
				t.Fatal("every client connected despite the full accept queue")
			}
			listener := net.JoinHostPort(podIP, "8080")
			if len(tr.explanations) == 0 {
				t.Fatalf("no finding for %d timed-out clients", failed)
			}
			for _, x := range tr.explanations {
				if x.Rule != "syn-dropped-at-listener" {
					t.Errorf("finding %s, want syn-dropped-at-listener: %s", x.Rule, x.Summary)
				}
				for _, want := range []string{"SYN to " + listener + " reached the listening socket 0.0.0.0:8080", "accept queue full", "DNATed to " + listener + " (pod default/echo-7c9f)"} {
					if !strings.Contains(x.Summary, want) {
						t.Errorf("the finding does not say %q: %s", want, x.Summary)
					}
				}
				namedService(t, x, output.JSONService{Namespace: "default", Name: "echo", Port: "http", Address: "node port"})
			}
			requireSameReplay(t, recording, tr)
			t.Log(tr.explanations[0].Summary)
		})
	}
}

// waitListed waits until kube-proxy has written a nat rule on node ns
// whose line holds every one of texts.
func waitListed(t *testing.T, ns string, texts ...string) {
	t.Helper()
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(500 * time.Millisecond) {
		for _, l := range strings.Split(sh(t, "ip", "netns", "exec", ns, "iptables-save", "-t", "nat"), "\n") {
			if !slices.ContainsFunc(texts, func(x string) bool { return !strings.Contains(l, x) }) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-proxy wrote no rule with %q in %s", texts, ns)
		}
	}
}

// dialAll connects n clients to addr from namespace ns at once.
func dialAll(t *testing.T, ns, addr string, n int, timeout time.Duration) []error {
	t.Helper()
	errs := make([]error, n)
	done := make(chan struct{})
	for i := range errs {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = dial(t, ns, "", addr, timeout)
		}()
	}
	for range errs {
		<-done
	}
	return errs
}

// TestClusterSeedServicePaths is seed 002's walk on the real cluster, in
// both of kube-proxy's modes: node-1 calls Service shop/walk's cluster IP,
// whose pods are one on each node, until both answered. Each path shows
// kube-proxy's DNAT at OUTPUT to its pod, the masquerade kube-proxy marks
// a node's traffic for (to cni0's address for the local pod, flannel.1's
// for the remote one), and the reply's two reverse translations; nothing
// is a finding.
func TestClusterSeedServicePaths(t *testing.T) {
	for _, mode := range []cluster.ProxyMode{cluster.IPTables, cluster.NFTables} {
		t.Run(string(mode), func(t *testing.T) {
			client := upCluster(t, cluster.Options{ProxyMode: mode})
			node1, node2 := cluster.NodeAt(1), cluster.NodeAt(2)
			svc, _ := seedService{namespace: "shop", name: "walk", pod: "walk-local", node: node1.Name,
				others: map[string]string{"walk-remote": node2.Name}}.make(t, client)
			clusterIP := svc.Spec.ClusterIP
			addr := net.JoinHostPort(clusterIP, "80")
			// Both pods answer before the walk: kube-proxy may write the
			// Service's rules with the first endpoint ready and add the
			// other a sync later (seen in CI: walk-local's sandbox waited
			// for flanneld's subnet file, and 64 asks all reached
			// walk-remote).
			waitAnswered(t, node1.Netns, addr, "walk-local")
			waitAnswered(t, node1.Netns, addr, "walk-remote")
			podIPs := map[string]string{}
			pods, err := client.CoreV1().Pods("shop").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				podIPs[p.Name] = p.Status.PodIP
			}
			w := startWatch(t, "--netns", "all", "host "+clusterIP)
			// kube-proxy picks an endpoint at random: ask until both
			// answered (64 asks reaching one of two: odds of 2^-63).
			answered := map[string]int{}
			for i := 0; i < 64 && (answered["walk-local"] == 0 || answered["walk-remote"] == 0); i++ {
				name, err := askName(t, node1.Netns, addr)
				if err != nil {
					t.Fatalf("asked %s from node-1: %v (answers so far %v)", addr, err, answered)
				}
				answered[name]++
			}
			tr := w.stop(t)
			if answered["walk-local"] == 0 || answered["walk-remote"] == 0 {
				t.Fatalf("answers %v, want both pods", answered)
			}
			if len(tr.explanations) > 0 {
				t.Errorf("findings on healthy paths: %+v", tr.explanations)
			}
			for pod, snatDev := range map[string]string{"walk-local": "cni0", "walk-remote": "flannel.1"} {
				requireWalk(t, tr, node1.Netns, clusterIP, podIPs[pod], snatDev)
			}
			t.Logf("answers %v", answered)
		})
	}
}

// requireWalk requires a path's translations in node ns: the DNAT at
// OUTPUT from the cluster IP to podIP, the masquerade at POSTROUTING out
// of snatDev, and the reply's un-SNAT and un-DNAT.
func requireWalk(t *testing.T, tr trace, ns, clusterIP, podIP, snatDev string) {
	t.Helper()
	has := func(what string, pred func(e output.JSONEvent) bool) {
		t.Helper()
		if len(find(tr.events, pred)) == 0 {
			t.Errorf("no event of %s (path to %s)", what, podIP)
		}
	}
	has("the DNAT at OUTPUT", func(e output.JSONEvent) bool {
		return inNs(e, ns) && e.Point == "nat" && e.Hook == "OUTPUT" && isSYN(e) && e.Translated &&
			e.Pre.Dst == clusterIP && e.Tuple.Dst == podIP && slices.Equal(e.Translations, []string{"dnat"})
	})
	has("the masquerade at POSTROUTING out of "+snatDev, func(e output.JSONEvent) bool {
		return inNs(e, ns) && e.Point == "nat" && e.Hook == "POSTROUTING" && isSYN(e) && e.Translated &&
			e.Tuple.Dst == podIP && e.OutDev == snatDev && slices.Equal(e.Translations, []string{"snat"})
	})
	has("the reply un-SNATed", func(e output.JSONEvent) bool {
		return inNs(e, ns) && e.Point == "nat" && e.Pre != nil && e.Pre.Src == podIP && slices.Equal(e.Translations, []string{"unsnat"})
	})
	has("the reply un-DNATed to the cluster IP", func(e output.JSONEvent) bool {
		return inNs(e, ns) && e.Point == "nat" && e.Pre != nil && e.Pre.Src == podIP && e.Tuple.Src == clusterIP &&
			slices.Equal(e.Translations, []string{"undnat"})
	})
}

// loadBalancerIP is the address a load-balancer implementation would give
// the seed's Service (the test writes it into the Service's status, as
// one does): an address of no namespace's, on the nodes' network.
const loadBalancerIP = "172.21.0.100"

// TestClusterSeedHairpin is incident 004 on the real cluster: pod client
// on node-1 calls the load-balancer address of Service default/ingress,
// whose only pod is on node-1 too. kube-proxy runs without the pods' CIDR,
// so with externalTrafficPolicy: Local it cannot tell the pod's call from
// an outside one and sends it to the local endpoint without marking it for
// masquerading; node-1's bridge does not pass bridged frames to iptables
// (bridge-nf-call-iptables=0, as on nodes without br_netfilter's call on).
// The ingress pod answers the client straight over the bridge from its own
// address, the client resets it, and nettrace names the reply that
// bypassed the NAT. The twin's policy is Cluster: kube-proxy masquerades
// the call and the reply comes back through the node. Both of
// kube-proxy's modes.
func TestClusterSeedHairpin(t *testing.T) {
	for _, mode := range []cluster.ProxyMode{cluster.IPTables, cluster.NFTables} {
		t.Run(string(mode), func(t *testing.T) { hairpinSeed(t, mode) })
	}
}

// hairpinSeed is TestClusterSeedHairpin with kube-proxy in mode. In
// nftables mode kube-proxy's chains name the Service but not whether its
// external or its load-balancer address was called; the API's Service
// says which.
func hairpinSeed(t *testing.T, mode cluster.ProxyMode) {
	client := upCluster(t, cluster.Options{NoProxyClusterCIDR: true, ProxyMode: mode})
	node1 := cluster.NodeAt(1)
	sh(t, "ip", "netns", "exec", node1.Netns, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0")
	caller := podNetns(t, client, "default", "client", node1)
	kubeconfig := nettraceKubeconfig(t, client)
	for _, fault := range []bool{false, true} {
		t.Run(map[bool]string{true: "local", false: "cluster"}[fault], func(t *testing.T) {
			s := seedService{namespace: "twin", name: "ingress", pod: "ingress-twin", node: node1.Name, kind: corev1.ServiceTypeLoadBalancer}
			if fault {
				s.namespace, s.pod, s.local = "default", "ingress-6b7d", true
			}
			svc, podIP := s.make(t, client)
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: loadBalancerIP}}
			if _, err := client.CoreV1().Services(s.namespace).UpdateStatus(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				client.CoreV1().Services(s.namespace).Delete(context.Background(), s.name, metav1.DeleteOptions{})
			})
			// The rule of this subtest's Service, not the twin's before it.
			if mode == cluster.NFTables {
				waitNFTListed(t, node1.Netns, loadBalancerIP+" . tcp . 80 ", s.namespace+"/"+s.name)
			} else {
				waitListed(t, node1.Netns, "-d "+loadBalancerIP+"/32", s.namespace+"/"+s.name)
			}
			recording := filepath.Join(t.TempDir(), "seed-004.ntrace")
			w := startWatch(t, "-w", recording, "--netns", "all", "--kubeconfig", kubeconfig, "host "+loadBalancerIP)
			err := dial(t, caller, "", loadBalancerIP+":80", 3*time.Second)
			tr := w.stop(t)
			x, ok := twinFinding(t, tr, err, fault, "reply-bypassed-nat")
			if !ok {
				return
			}
			for _, want := range []string{"reply from " + podIP + ":8080 (pod default/ingress-6b7d)", "(pod default/client)", "the client called " + loadBalancerIP + ":80"} {
				if !strings.Contains(x.Summary, want) {
					t.Errorf("the finding does not say %q: %s", want, x.Summary)
				}
			}
			namedService(t, x, output.JSONService{Namespace: "default", Name: "ingress", Port: "http", Address: "load balancer IP"})
			if mode == cluster.NFTables {
				ruleSaysEither(t, x)
			}
			requireSameReplay(t, recording, tr)
			t.Log(x.Summary)
		})
	}
}

// ruleSaysEither requires the DNAT rule behind a finding of nftables
// mode to name the Service as its chains do, not telling an external IP
// from a load balancer's: the finding's "load balancer IP" came from the
// API.
func ruleSaysEither(t *testing.T, x output.JSONExplanation) {
	t.Helper()
	for _, r := range x.NetfilterRules {
		if r.Role == "decided" && r.Service != nil {
			if r.Service.Address != "external or load balancer IP" {
				t.Errorf("kube-proxy's rule %s %s names %+v, want its chain's \"external or load balancer IP\"", r.Chain, r.Text, *r.Service)
			}
			return
		}
	}
	t.Errorf("no decided rule of kube-proxy's behind the finding: %+v", x.NetfilterRules)
}

// waitNFTListed waits until kube-proxy's nftables mode has written a line
// holding every one of texts into its table on node ns.
func waitNFTListed(t *testing.T, ns string, texts ...string) {
	t.Helper()
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(500 * time.Millisecond) {
		out, _ := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", "kube-proxy").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if !slices.ContainsFunc(texts, func(x string) bool { return !strings.Contains(l, x) }) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-proxy wrote no line with %q into its nftables table in %s:\n%s", texts, ns, out)
		}
	}
}

// podNetns makes pod namespace/name on node (the lab's image, serving)
// and returns the path of its network namespace once it is ready.
func podNetns(t *testing.T, client kubernetes.Interface, namespace, name string, node cluster.Node) string {
	t.Helper()
	p := readyPod(t, client, labPod(namespace, name, node.Name, 8080, map[string]string{"app": name}))
	path, err := cluster.PodNetns(node, p.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// readyPod makes pod and returns it as the API has it once its container
// is ready.
func readyPod(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(200 * time.Millisecond) {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s not ready within %s (%v)", pod.Namespace, pod.Name, cluster.Patience, err)
		}
	}
}

// deletePod deletes a pod and waits until the API has it no more: the
// kubelet has torn its sandbox down.
func deletePod(t *testing.T, client kubernetes.Interface, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	if err := client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(200 * time.Millisecond) {
		_, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s not gone within %s (%v)", namespace, name, cluster.Patience, err)
		}
	}
}

// seedHostPort is the port seed 003's pods serve on their node, through
// the CNI portmap plugin.
const seedHostPort = 8443

// TestClusterSeedStaleHostPort is incident 003 on the real cluster: pod
// web-a serves hostPort 8443 on node-1 through the CNI portmap plugin,
// whose CNI-DN chain DNATs the port to the pod. The node's CNI network is
// renamed while the pod runs, as an upgrade or migration of the network
// plugin does; the pod is then deleted, and its teardown, made under the
// new name, does not find its portmap chain, named after the network and
// the sandbox (containernetworking/plugins#752): the chain stays, ahead of
// the one portmap writes for web-b, which replaces web-a. A client
// outside the cluster calling node-1's hostPort is DNATed to the dead
// pod's address, which no neighbour answers. The twin replaces the pod
// under an unchanged network: web-b answers.
//
// The incident's own cause, containerd stopped during the kubelet's
// delete, leaves no chain with Debian's containerd 1.6: once it is back,
// the kubelet asks again and containerd runs the sandbox's CNI DEL again.
// The state it leaves is the renamed network's, and so is the finding.
func TestClusterSeedStaleHostPort(t *testing.T) {
	client := upCluster(t, cluster.Options{})
	kubeconfig := nettraceKubeconfig(t, client)
	node1 := cluster.NodeAt(1)
	target := net.JoinHostPort(node1.IP, fmt.Sprint(seedHostPort))
	for _, fault := range []bool{false, true} {
		t.Run(map[bool]string{true: "renamed", false: "healthy"}[fault], func(t *testing.T) {
			namespace := map[bool]string{true: "default", false: "twin"}[fault]
			if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			dead := readyPod(t, client, hostPortPod(namespace, "web-a", node1.Name)).Status.PodIP
			waitAnswered(t, cluster.Underlay, target, "web-a")
			// Started before the pod goes: the API tells it which pod had
			// the address, and when it went.
			recording := filepath.Join(t.TempDir(), "seed-003.ntrace")
			w := startWatch(t, "-w", recording, "--netns", "all", "--kubeconfig", kubeconfig, fmt.Sprint("port ", seedHostPort))
			if fault {
				if err := cluster.RenameNetwork(node1, cluster.NetworkName+"-v2"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := cluster.RenameNetwork(node1, cluster.NetworkName); err != nil {
						t.Error(err)
					}
				})
			}
			deletePod(t, client, namespace, "web-a")
			live := readyPod(t, client, hostPortPod(namespace, "web-b", node1.Name)).Status.PodIP
			t.Cleanup(func() { deletePod(t, client, namespace, "web-b") })
			if live == dead {
				t.Fatalf("web-b has web-a's address %s: a stale DNAT would reach it", live)
			}
			// The kernel frees a SYN queued for a neighbour that never
			// answers after its three probes, a second apart.
			err := dial(t, cluster.Underlay, "", target, 6*time.Second)
			tr := w.stop(t)
			x, ok := twinFinding(t, tr, err, fault, "dnat-to-dead-endpoint")
			if !ok {
				return
			}
			for _, want := range []string{"SYN to " + target, "was DNATed to " + net.JoinHostPort(dead, "8080") + " (pod default/web-a, deleted at ",
				node1.Netns + " PREROUTING", "neighbour resolution failed", "NEIGH_FAILED"} {
				if !strings.Contains(x.Summary, want) {
					t.Errorf("the finding does not say %q: %s", want, x.Summary)
				}
			}
			// The stale CNI-DN chain's DNAT, and the live one's behind it.
			r := labRun{family: lab.IPv4}
			r.namedRule(t, x, node1.Netns, "decided", "-j DNAT --to-destination "+net.JoinHostPort(dead, "8080"))
			r.namedRule(t, x, node1.Netns, "other", "-j DNAT --to-destination "+net.JoinHostPort(live, "8080"))
			requireSameReplay(t, recording, tr)
			t.Log(x.Summary)
		})
	}
}

// hostPortPod is a pod of the lab's image on node serving port 8080 as
// its node's hostPort.
func hostPortPod(namespace, name, node string) *corev1.Pod {
	p := labPod(namespace, name, node, 8080, map[string]string{"app": name})
	p.Spec.Containers[0].Ports[0].HostPort = seedHostPort
	return p
}
