package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// hostMount is a host path mounted into nettrace's container.
type hostMount struct {
	host, container string
	readOnly        bool
}

// TestDeployAsksWhatPodmanGives: the DaemonSet and the kubectl debug
// profile ask for exactly the capabilities, namespaces and mounts that
// deploy/podman-run.sh gives the image, with which TestPodman names
// incident 1; and nettrace accepts the DaemonSet's arguments and records
// with them.
func TestDeployAsksWhatPodmanGives(t *testing.T) {
	ds := daemonSet(t)
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	script, err := os.ReadFile("../deploy/podman-run.sh")
	if err != nil {
		t.Fatal(err)
	}
	run := string(script)
	caps := strings.Split(regexp.MustCompile(`--cap-add (\S+)`).FindStringSubmatch(run)[1], ",")
	var dsCaps []string
	for _, c := range sc.Capabilities.Add {
		dsCaps = append(dsCaps, string(c))
	}
	if !sameSet(dsCaps, caps) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !strings.Contains(run, "--cap-drop all") {
		t.Errorf("DaemonSet adds %v and drops %v; podman-run.sh adds %v", dsCaps, sc.Capabilities.Drop, caps)
	}
	if profile := debugProfileCaps(t); !sameSet(profile, caps) {
		t.Errorf("debug-profile.json adds %v; podman-run.sh adds %v", profile, caps)
	}
	for flag, ds := range map[string]bool{"--network host": pod.HostNetwork, "--pid host": pod.HostPID,
		"--read-only": sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem} {
		if !strings.Contains(run, flag) || !ds {
			t.Errorf("podman-run.sh has %s: %v; the DaemonSet: %v", flag, strings.Contains(run, flag), ds)
		}
	}
	if sc.Privileged == nil || *sc.Privileged {
		t.Error("the DaemonSet's container is privileged")
	}
	if !sameMounts(daemonSetMounts(t, pod, c), podmanMounts(t, run)) {
		t.Errorf("DaemonSet mounts %v; podman-run.sh mounts %v", daemonSetMounts(t, pod, c), podmanMounts(t, run))
	}
	runDaemonSetArgs(t, c.Args)
}

func daemonSet(t *testing.T) appsv1.DaemonSet {
	t.Helper()
	text, err := os.ReadFile("../deploy/nettrace-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(text), "\n---\n") {
		if !strings.Contains(doc, "\nkind: DaemonSet\n") {
			continue
		}
		var ds appsv1.DaemonSet
		if err := yaml.UnmarshalStrict([]byte(doc), &ds); err != nil {
			t.Fatalf("the DaemonSet: %v", err)
		}
		return ds
	}
	t.Fatal("no DaemonSet in deploy/nettrace-daemonset.yaml")
	return appsv1.DaemonSet{}
}

func debugProfileCaps(t *testing.T) []string {
	t.Helper()
	text, err := os.ReadFile("../deploy/debug-profile.json")
	if err != nil {
		t.Fatal(err)
	}
	var profile corev1.Container
	dec := json.NewDecoder(strings.NewReader(string(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&profile); err != nil {
		t.Fatalf("debug-profile.json: %v", err)
	}
	var caps []string
	for _, c := range profile.SecurityContext.Capabilities.Add {
		caps = append(caps, string(c))
	}
	return caps
}

// daemonSetMounts are the container's host paths: hostPath volumes only.
func daemonSetMounts(t *testing.T, pod corev1.PodSpec, c corev1.Container) []hostMount {
	t.Helper()
	var mounts []hostMount
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || pod.Volumes[i].HostPath == nil {
			t.Fatalf("volume %s: not a host path", m.Name)
		}
		if strings.HasPrefix(m.MountPath, "/run/netns") && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer) {
			t.Errorf("/run/netns without HostToContainer propagation: namespaces made later are not seen")
		}
		mounts = append(mounts, hostMount{pod.Volumes[i].HostPath.Path, m.MountPath, m.ReadOnly})
	}
	return mounts
}

// podmanMounts are podman-run.sh's volumes with its defaults in place of
// its variables.
func podmanMounts(t *testing.T, run string) []hostMount {
	t.Helper()
	defaults := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+)=\$\{\w+:-([^}]+)\}`).FindAllStringSubmatch(run, -1) {
		defaults["$"+m[1]] = m[2]
	}
	var mounts []hostMount
	for _, m := range regexp.MustCompile(`--volume "?([^"\s]+)"?`).FindAllStringSubmatch(run, -1) {
		spec := m[1]
		for v, d := range defaults {
			spec = strings.ReplaceAll(spec, v, d)
		}
		parts := strings.Split(spec, ":")
		mounts = append(mounts, hostMount{parts[0], parts[1], len(parts) > 2 && strings.Contains(parts[2], "ro")})
	}
	if len(mounts) == 0 {
		t.Fatal("podman-run.sh mounts nothing")
	}
	return mounts
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func sameMounts(a, b []hostMount) bool {
	key := func(m hostMount) string {
		return m.host + ":" + m.container + ":" + map[bool]string{true: "ro"}[m.readOnly]
	}
	var ka, kb []string
	for _, m := range a {
		ka = append(ka, key(m))
	}
	for _, m := range b {
		kb = append(kb, key(m))
	}
	return sameSet(ka, kb)
}

// runDaemonSetArgs runs nettrace with the DaemonSet's arguments, its
// recordings' directory moved to a temporary one, for a few seconds: it
// must attach and stop cleanly.
func runDaemonSetArgs(t *testing.T, args []string) {
	t.Helper()
	dir := t.TempDir()
	var run []string
	for _, a := range args {
		// The metrics listen on loopback here, not on the host's
		// addresses.
		a = strings.Replace(a, "--metrics=:", "--metrics=127.0.0.1:", 1)
		run = append(run, strings.ReplaceAll(a, "/var/lib/nettrace", dir))
	}
	run = append(run, "--duration", "3s")
	out, err := exec.Command(nettraceBin, run...).CombinedOutput()
	if err != nil {
		t.Fatalf("nettrace %s: %v\n%s", strings.Join(run, " "), err, out)
	}
	if !strings.Contains(string(out), "watching") {
		t.Errorf("nettrace %s did not watch:\n%s", strings.Join(run, " "), out)
	}
}
