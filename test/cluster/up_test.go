package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The pods' image has no C library: a dynamically linked ntlab is refused
// with a reason before anything is made, a static one taken.
func TestStaticRequired(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nimport \"os/user\"\nfunc main() { user.Current() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cgo := range []string{"0", "1"} {
		bin := filepath.Join(dir, "bin-cgo"+cgo)
		build := exec.Command("go", "build", "-o", bin, src)
		build.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOFLAGS=-mod=mod")
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build (CGO_ENABLED=%s): %v\n%s", cgo, err, out)
		}
		err := static(bin)
		if (err == nil) != (cgo == "0") {
			t.Errorf("CGO_ENABLED=%s: static says %v", cgo, err)
		}
	}
}
