package kube

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testPod(uid, name, ip string, hostNetwork bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(uid)},
		Spec:       corev1.PodSpec{HostNetwork: hostNetwork},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func TestDirectoryNamesAddresses(t *testing.T) {
	clock := time.Date(2026, 12, 7, 5, 40, 12, 0, time.UTC)
	d := NewDirectory()
	d.now = func() time.Time { return clock }
	web := testPod("u1", "web-1", "10.244.1.2", false)
	d.SetPod(web)
	d.SetPod(testPod("u2", "agent", "172.21.0.1", true))
	d.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "172.21.0.1"}, {Type: corev1.NodeHostName, Address: "node-1"}}}})
	pod := netip.MustParseAddr("10.244.1.2")
	node := netip.MustParseAddr("172.21.0.1")

	steps := []struct {
		name      string
		do        func()
		pod, node string
	}{
		{"a live pod and a node; a host-network pod names nothing", func() {}, "shop/web-1", "node-1"},
		{"a deleted pod keeps its address with when it went", func() { d.DeletePod(web) }, "shop/web-1, deleted at 05:40:12 UTC", "node-1"},
		{"a new pod with the address is named instead", func() { d.SetPod(testPod("u3", "web-2", "10.244.1.2", false)) }, "shop/web-2", "node-1"},
		{"a finished pod has given its address back", func() {
			p := testPod("u3", "web-2", "10.244.1.2", false)
			p.Status.Phase = corev1.PodSucceeded
			d.SetPod(p)
		}, "shop/web-2, deleted at 05:40:12 UTC", "node-1"},
		{"past Keep the deleted pod is forgotten", func() { clock = clock.Add(Keep + time.Second) }, "", "node-1"},
		{"a deleted node is forgotten", func() { d.DeleteNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}) }, "", ""},
	}
	var gen uint64
	for _, s := range steps {
		s.do()
		g, pods := d.PodAddresses()
		_, nodes := d.NodeAddresses()
		if pods[pod] != s.pod || nodes[node] != s.node {
			t.Errorf("%s: pod %q, node %q; want %q, %q", s.name, pods[pod], nodes[node], s.pod, s.node)
		}
		if g == gen && s.name != steps[0].name {
			t.Errorf("%s: the generation stayed %d", s.name, g)
		}
		gen = g
	}
}

// The API's pods win over the node's files, which still name what the
// API does not; the merge changes generation when either source does.
func TestOverNamesFromTopThenBase(t *testing.T) {
	a, b := netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("10.244.1.3")
	topGen, top := uint64(1), map[netip.Addr]string{a: "shop/web-1"}
	base := map[netip.Addr]string{a: "stale/name", b: "shop/db-0"}
	names := Over(func() (uint64, map[netip.Addr]string) { return topGen, top }, func() (uint64, map[netip.Addr]string) { return 1, base })
	gen, got := names()
	if got[a] != "shop/web-1" || got[b] != "shop/db-0" {
		t.Fatalf("merged %v", got)
	}
	if again, _ := names(); again != gen {
		t.Errorf("generation moved from %d to %d with nothing changed", gen, again)
	}
	topGen, top = 2, map[netip.Addr]string{}
	if next, got := names(); next == gen || got[a] != "stale/name" {
		t.Errorf("after the API forgot %s: generation %d (was %d), name %q", a, next, gen, got[a])
	}
}
