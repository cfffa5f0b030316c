package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/nettrace-dev/nettrace/internal/probe"
)

// nettraceVersion goes into recordings, and into --version beside what
// the build says of itself.
const nettraceVersion = "0.1.0-dev"

// versionText is what nettrace --version prints, for a bug report: the
// version, the module's version and the commit it was built from (Go
// records both when it builds from a module or a git tree), the Go
// release, and the hash of the BPF objects built in.
func versionText() string {
	module, commit, modified := "(unknown)", "(unknown)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		module = bi.Main.Version
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				commit = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				modified = " (with uncommitted changes)"
			}
		}
	}
	return fmt.Sprintf("nettrace %s\nmodule %s\ncommit %s%s\n%s %s/%s\nbpf objects %s\n",
		nettraceVersion, module, commit, modified, runtime.Version(), runtime.GOOS, runtime.GOARCH, probe.ObjectsHash())
}
