package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// A namespace with no name under /run/netns (a container's) is named by
// the process in it, live and in the recording's replay; here one made
// after the run began, as pods are on a node.
func TestUnnamedNamespaceIsNamedByItsProcess(t *testing.T) {
	recording := filepath.Join(t.TempDir(), "unnamed.ntrace")
	w := startWatch(t, "-w", recording, "tcp port 7")

	holder := exec.Command("unshare", "--net", "--", "sleep", "120")
	if err := holder.Start(); err != nil {
		t.Fatalf("start a process in a new namespace: %v", err)
	}
	t.Cleanup(func() {
		holder.Process.Kill()
		holder.Wait()
	})
	want := fmt.Sprintf("sleep[%d]", holder.Process.Pid)
	// unshare execs sleep once the namespace is made.
	path := fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)
	for deadline := time.Now().Add(lab.Patience); ; time.Sleep(10 * time.Millisecond) {
		comm := sh(t, "cat", fmt.Sprintf("/proc/%d/comm", holder.Process.Pid))
		if strings.TrimSpace(comm) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the namespace's process is still %q after %s", comm, lab.Patience)
		}
	}
	sh(t, "nsenter", "--net="+path, "ip", "link", "set", "lo", "up")
	// Nothing listens on port 7: the SYN is answered by a reset.
	if err := netns.Do(path, func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:7", time.Second)
		if err == nil {
			c.Close()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	live := w.stop(t)

	requireNamed := func(what string, flows []output.JSONFlow) {
		t.Helper()
		var names []string
		for _, f := range flows {
			for _, p := range f.Packets {
				for _, s := range p.Steps {
					names = append(names, s.Netns)
					if s.Netns == want {
						return
					}
				}
			}
		}
		t.Errorf("%s: no step in %s; namespaces named: %q", what, want, names)
	}
	requireNamed("live", live.flows)

	out, err := exec.Command(nettraceBin, "replay", recording, "-o", "json", "--timelines", "all").Output()
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	var replayed []output.JSONFlow
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var f output.JSONFlow
		if json.Unmarshal(line, &f) == nil && f.Type == "flow" {
			replayed = append(replayed, f)
		}
	}
	requireNamed("replay", replayed)
}
