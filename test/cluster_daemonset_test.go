package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/cluster"
)

// kubectl runs the kubectl `make kube` built, as the cluster's
// administrator, and returns its output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(clusterBinaries(t).Kube, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nodeImage builds nettrace's image as `make image` does, under the name
// the DaemonSet asks for, and imports it into every node's containerd.
func nodeImage(t *testing.T) {
	t.Helper()
	const name = "docker.io/library/nettrace:dev" // the DaemonSet's nettrace:dev, as the kubelet spells it
	buildImage(t, name)
	// The manifest list with every architecture's image, as a registry
	// would serve it: the node's containerd picks its own.
	archive := filepath.Join(t.TempDir(), "nettrace.oci.tar")
	sh(t, "podman", "manifest", "push", "--quiet", "--all", name, "oci-archive:"+archive+":"+name)
	if err := cluster.ImportImage(archive); err != nil {
		t.Fatal(err)
	}
}

// recorderPods waits until the DaemonSet's pod runs on every node and has
// said it is watching, naming pods and nodes from the API with its
// ServiceAccount; it returns the pods by node.
func recorderPods(t *testing.T, client kubernetes.Interface) map[string]string {
	t.Helper()
	ctx := context.Background()
	byNode := map[string]string{}
	var last string
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(time.Second) {
		pods, err := client.CoreV1().Pods("nettrace").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nettrace"})
		if err == nil {
			clear(byNode)
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && strings.Contains(podLog(client, p.Name), "naming pods, nodes and Services from the Kubernetes API") {
					byNode[p.Spec.NodeName] = p.Name
				}
				last = fmt.Sprintf("%s on %s: %s; log: %s", p.Name, p.Spec.NodeName, p.Status.Phase, podLog(client, p.Name))
			}
		}
		if len(byNode) == cluster.Nodes {
			return byNode
		}
		if time.Now().After(deadline) {
			t.Fatalf("nettrace not watching on every node (%v); last: %s (%v)", byNode, last, err)
		}
	}
}

// podLog is a nettrace pod's log as the API serves it, "" when it has none
// yet.
func podLog(client kubernetes.Interface, pod string) string { return logOf(client, "nettrace", pod) }

// logOf is a pod's log as the API serves it, "" when it has none yet.
func logOf(client kubernetes.Interface, namespace, pod string) string {
	b, err := client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{}).Do(context.Background()).Raw()
	if err != nil {
		return ""
	}
	return string(b)
}

// TestClusterDaemonSet: deploy/ applied to the cluster as a user applies
// it (kubectl apply, the image imported as a registry would serve it):
// nettrace runs on both nodes as a flight recorder, naming pods and nodes
// with the DaemonSet's ServiceAccount. Seed 001's fault (a NodePort
// Service whose pod does not accept) writes a flight file on each node;
// kubectl cp fetches them, and replayed together they name the fault and
// its pod. The lab's nodes share one kernel, so each node's recorder sees
// both nodes' packets: each file alone names the fault too.
func TestClusterDaemonSet(t *testing.T) {
	client := upCluster(t, cluster.Options{})
	nodeImage(t)
	kubectl(t, "apply", "-f", "../deploy/nettrace-daemonset.yaml")
	pods := recorderPods(t, client)
	node1, node2 := cluster.NodeAt(1), cluster.NodeAt(2)
	s := seedService{namespace: "default", name: "echo", pod: "echo-7c9f", node: node2.Name, kind: corev1.ServiceTypeNodePort,
		serveArgs: []string{"--backlog", "1", "--no-accept"}}
	svc, podIP := s.make(t, client)
	nodePort := fmt.Sprint(svc.Spec.Ports[0].NodePort)
	waitListed(t, node1.Netns, "--dport "+nodePort+" ", "default/echo")
	target := net.JoinHostPort(node1.IP, nodePort)
	callFailing(t, target)
	var files []string
	for node, pod := range pods {
		dir := filepath.Join(t.TempDir(), node)
		fetched := flightFiles(t, pod, dir)
		files = append(files, fetched...)
		// Each node's recorder tells what happened on its node: node-1's
		// the DNAT of the Service's node port by kube-proxy's rules in its
		// own namespace, node-2's the pod's namespace, named from its
		// libcni cache, which the DaemonSet mounts.
		want := map[string]string{node1.Name: "(Service default/echo:http, node port) was DNATed to " + podIP + ":8080 (pod default/echo-7c9f) in self PREROUTING",
			node2.Name: "reached the listening socket 0.0.0.0:8080 in netns pod:default/echo-7c9f"}[node]
		if out := replay(t, fetched...); !strings.Contains(out, want) {
			t.Errorf("%s's files do not say %q:\n%s", node, want, findingLines(out))
		}
		requireFindingLogged(t, podLog(client, pod), "syn-dropped-at-listener", "default/echo-7c9f", fetched)
		// Where a cluster looks: the API server's proxy to the port the
		// DaemonSet declares.
		scraped := kubectl(t, "get", "--raw", "/api/v1/namespaces/nettrace/pods/"+pod+":9476/proxy/metrics")
		if !regexp.MustCompile(`(?m)^nettrace_findings_total\{namespace="default",pod="echo-7c9f",rule="syn-dropped-at-listener"\} [1-9]`).MatchString(scraped) ||
			!strings.Contains(scraped, "process_resident_memory_bytes") {
			t.Errorf("%s's metrics do not count the finding:\n%s", pod, scraped)
		}
	}
	out := replay(t, files...)
	for _, want := range []string{"syn-dropped-at-listener", "DNATed to " + podIP + ":8080 (pod default/echo-7c9f)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the replay of both nodes' files does not say %q:\n%s", want, out)
		}
	}
	// Replayed as one, namespaces are named after the node whose recorder
	// saw them (the DaemonSet gives each recorder its node's name). Which
	// node's events the finding rests on is chance here: the lab's nodes
	// share a kernel, so each recorder sees both nodes' packets.
	if named := regexp.MustCompile(`in netns (` + node1.Name + `|` + node2.Name + `):`); !named.MatchString(out) {
		t.Errorf("the replay of both nodes' files does not name a namespace after its node (%s):\n%s", named, findingLines(out))
	}
	t.Logf("%d flight files; replayed together, the findings:\n%s", len(files), findingLines(out))
	// The listener's queues as sock_diag gives them from the debugging
	// pod: its server listens on every address, 0.0.0.0:8080.
	debugNode(t, client, node2, nodePort, target, "reached the listening socket 0.0.0.0:8080 in netns pod:default/echo-7c9f and was dropped in tcp_conn_request: accept queue full")
	requireGoneNamespaceLetGo(t, client, node2, s.pod)
}

// requireGoneNamespaceLetGo deletes pod and requires that, once it is
// gone, no nettrace holds its network namespace open: a recorder that
// runs for days sees thousands of pods come and go.
func requireGoneNamespaceLetGo(t *testing.T, client kubernetes.Interface, node cluster.Node, pod string) {
	t.Helper()
	ctx := context.Background()
	p, err := client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s: %v", pod, err)
	}
	path, err := cluster.PodNetns(node, p.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	held, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var holders []string
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(2 * time.Second) {
		holders = holders[:0]
		fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && l == held {
				comm, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(fd)), "comm"))
				holders = append(holders, strings.TrimSpace(string(comm))+" "+fd)
			}
		}
		if len(holders) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s of deleted pod %s still held open %s later by: %v", held, pod, cluster.Patience, holders)
		}
	}
}

// callFailing has eight clients outside the cluster call target at once,
// and requires that some time out.
func callFailing(t *testing.T, target string) {
	t.Helper()
	failed := 0
	for _, err := range dialAll(t, cluster.Underlay, target, 8, 3*time.Second) {
		if err != nil {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("every client connected despite the full accept queue")
	}
}

// debugNode runs deploy/README.md's kubectl debug recipe on node: nettrace
// watch in a debugging pod with deploy/debug-profile.json, the node's
// root at /host. While it watches the clients fail again, and its output
// names the finding as want says it: the pods of the node named from its
// libcni cache, read under /host.
func debugNode(t *testing.T, client kubernetes.Interface, node cluster.Node, nodePort, target, want string) {
	t.Helper()
	out := kubectl(t, "debug", "node/"+node.Name, "--image=nettrace:dev", "--profile=general", "--custom=../deploy/debug-profile.json",
		"--", "nettrace", "watch", "--netns", "all", "--cni-cache", "/host/var/lib/cni/results", "--duration", "45s", "-o", "json", "port "+nodePort)
	m := regexp.MustCompile(`pod (node-debugger-\S+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("kubectl debug made no pod it names: %s", out)
	}
	pod := m[1]
	t.Cleanup(func() { client.CoreV1().Pods("default").Delete(context.Background(), pod, metav1.DeleteOptions{}) })
	for deadline := time.Now().Add(cluster.Patience); !strings.Contains(logOf(client, "default", pod), "watching"); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("nettrace in %s not watching after %s: %s", pod, cluster.Patience, logOf(client, "default", pod))
		}
	}
	callFailing(t, target)
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(2 * time.Second) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
		if err == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not done after %s (%v)", pod, cluster.Patience, err)
		}
	}
	log := logOf(client, "default", pod)
	var objects []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, `{"type":`) {
			objects = append(objects, l)
		}
	}
	tr := parseTrace(t, []byte(strings.Join(objects, "\n")))
	if !slices.ContainsFunc(tr.explanations, func(x output.JSONExplanation) bool {
		return x.Rule == "syn-dropped-at-listener" && strings.Contains(x.Summary, want)
	}) {
		t.Fatalf("kubectl debug's nettrace names no syn-dropped-at-listener saying %q; its log:\n%s", want, log)
	}
	t.Logf("kubectl debug node/%s: %d findings, the first: %s", node.Name, len(tr.explanations), tr.explanations[0].Summary)
}

// replay replays recordings as one, in text.
func replay(t *testing.T, files ...string) string {
	t.Helper()
	out, err := exec.Command(nettraceBin, append([]string{"replay", "-o", "text"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("replay %v: %v\n%s", files, err, out)
	}
	return string(out)
}

// findingLines are the lines of replay's text output that tell findings
// ("  RULE: sentence").
func findingLines(text string) string {
	return strings.Join(regexp.MustCompile(`(?m)^  [a-z][-a-z]+: .*$`).FindAllString(text, -1), "\n")
}

// flightFiles copies the flight recorder's directory out of pod with
// kubectl cp once it holds a file, and returns the files.
func flightFiles(t *testing.T, pod, dir string) []string {
	t.Helper()
	for deadline := time.Now().Add(cluster.Patience); ; time.Sleep(2 * time.Second) {
		os.RemoveAll(dir)
		kubectl(t, "cp", "nettrace/"+pod+":/var/lib/nettrace/flight", dir)
		files, _ := filepath.Glob(filepath.Join(dir, "*.ntrace"))
		if len(files) > 0 {
			return files
		}
		if time.Now().After(deadline) {
			t.Fatalf("no flight file in %s after %s", pod, cluster.Patience)
		}
	}
}

// requireFindingLogged: the recorder's log (JSON lines) has the finding of
// rule about pod as a line of its own, and says which of the files fetched
// holds it.
func requireFindingLogged(t *testing.T, log, rule, pod string, fetched []string) {
	t.Helper()
	var found, filed bool
	for _, l := range strings.Split(log, "\n") {
		var line struct{ Rule, Pod, File, Message string }
		if json.Unmarshal([]byte(l), &line) != nil {
			continue
		}
		found = found || line.Rule == rule && line.Pod == pod && line.Message != ""
		filed = filed || line.File != "" && slices.ContainsFunc(fetched, func(f string) bool { return filepath.Base(f) == filepath.Base(line.File) })
	}
	if !found || !filed {
		t.Errorf("the log has the %s finding about %s: %v; names a file fetched (%v): %v; log:\n%s", rule, pod, found, fetched, filed, log)
	}
}
