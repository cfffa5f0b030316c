package kube

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nettrace-dev/nettrace/pkg/service"
)

func TestDirectoryNamesServices(t *testing.T) {
	d := NewDirectory()
	web := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: types.UID("s1")},
		Spec: corev1.ServiceSpec{
			ClusterIPs:  []string{"10.96.0.10", "fd00:96::10"},
			ExternalIPs: []string{"192.0.2.7"},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
			},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.21.0.100"}, {Hostname: "lb.example"}}}},
	}
	d.SetService(web)
	d.SetService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "headless", UID: types.UID("s2")},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{corev1.ClusterIPNone}, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}}})
	gen, table := d.ServiceFrontends()

	http := service.Service{Namespace: "shop", Name: "web", Port: "http"}
	at := func(kind string) service.Service { s := http; s.Address = kind; return s }
	cases := []struct {
		name     string
		protocol uint8
		dst      string
		toNode   bool
		want     service.Service
		found    bool
	}{
		{"cluster IP", 6, "10.96.0.10:80", false, at(service.ClusterIP), true},
		{"second family's cluster IP", 6, "[fd00:96::10]:80", false, at(service.ClusterIP), true},
		{"external IP", 6, "192.0.2.7:80", false, at(service.ExternalIP), true},
		{"load-balancer IP", 6, "172.21.0.100:80", false, at(service.LoadBalancerIP), true},
		{"node port at a node's address", 6, "172.21.0.1:30080", true, at(service.NodePort), true},
		{"node port elsewhere is someone else's", 6, "172.21.0.1:30080", false, service.Service{}, false},
		{"UDP port", 17, "10.96.0.10:53", false, service.Service{Namespace: "shop", Name: "web", Port: "dns", Address: service.ClusterIP}, true},
		{"another protocol at the port", 17, "10.96.0.10:80", false, service.Service{}, false},
		{"another port", 6, "10.96.0.10:81", false, service.Service{}, false},
	}
	for _, c := range cases {
		got, found := table.At(c.protocol, netip.MustParseAddrPort(c.dst), c.toNode)
		if got != c.want || found != c.found {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, found, c.want, c.found)
		}
	}
	if table.Len() != 9 {
		t.Errorf("%d frontends, want 9 (5 of http, 4 of dns; the headless Service has none): %+v", table.Len(), table.Frontends())
	}

	if again, _ := d.ServiceFrontends(); again != gen {
		t.Errorf("generation %d changed to %d with no Service changed", gen, again)
	}
	d.SetPod(testPod("u1", "web-1", "10.244.1.2", false))
	if again, _ := d.ServiceFrontends(); again != gen {
		t.Errorf("a pod's change changed the Services' generation (%d to %d): recordings would carry the table again", gen, again)
	}
	d.DeleteService(web)
	next, table := d.ServiceFrontends()
	if next == gen {
		t.Error("deleting a Service left the generation")
	}
	if _, found := table.At(6, netip.MustParseAddrPort("10.96.0.10:80"), false); found {
		t.Error("a deleted Service's cluster IP is still named")
	}
}
