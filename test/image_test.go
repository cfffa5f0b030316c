package test

import (
	"debug/elf"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// buildImage builds nettrace's image as `make image` does, a manifest list
// of an image per architecture under name, removed with its images when
// the test ends.
func buildImage(t *testing.T, name string) {
	t.Helper()
	t.Cleanup(func() { exec.Command("../scripts/image.sh", "--remove", name).Run() })
	sh(t, "../scripts/image.sh", name)
}

// imageTriplets are the library directories of the image's architectures,
// by the ELF machine their programs are built for.
var imageTriplets = map[string]struct {
	machine elf.Machine
	triplet string
}{"amd64": {elf.EM_X86_64, "x86_64-linux-gnu"}, "arm64": {elf.EM_AARCH64, "aarch64-linux-gnu"}}

// The image is a manifest list of an amd64 and an arm64 image, and each
// holds every program built for its architecture, with every library
// each one loads: an arm64 node runs the arm64 image as this machine's
// kernel cannot (TestPodman runs the amd64 one), so its filesystem is
// checked here as its loader would resolve it.
func TestImageHoldsEachArchitecture(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatalf("needs podman (Debian package podman: make deps installs it): %v", err)
	}
	name := "localhost/nettrace:arch-test"
	buildImage(t, name)
	var list struct {
		Manifests []struct {
			Platform struct{ Architecture, OS string }
		}
	}
	if err := json.Unmarshal([]byte(sh(t, "podman", "manifest", "inspect", name)), &list); err != nil {
		t.Fatalf("podman manifest inspect %s: %v", name, err)
	}
	var platforms []string
	for _, m := range list.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	slices.Sort(platforms)
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("manifest list %s holds %v, want %v", name, platforms, want)
	}
	for arch, want := range imageTriplets {
		t.Run(arch, func(t *testing.T) {
			image := name + "-" + arch
			if got := strings.TrimSpace(sh(t, "podman", "image", "inspect", "--format", "{{.Architecture}}", image)); got != arch {
				t.Errorf("%s says it is for %s", image, got)
			}
			root := strings.TrimSpace(sh(t, "podman", "image", "mount", image))
			t.Cleanup(func() { exec.Command("podman", "image", "unmount", image).Run() })
			files := checkELFTree(t, root, want.machine, want.triplet)
			for _, p := range []string{"usr/bin/nettrace", "usr/sbin/xtables-nft-multi", "usr/sbin/nft", "usr/bin/busybox"} {
				if !slices.Contains(files, p) {
					t.Errorf("%s has no program %s (its ELF files: %v)", image, p, files)
				}
			}
		})
	}
}

// checkELFTree requires every ELF file under root to be built for machine,
// and its interpreter and libraries to be in root where a loader with no
// ld.so.cache finds them; it returns the ELF files' paths.
func checkELFTree(t *testing.T, root string, machine elf.Machine, triplet string) (files []string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := elf.Open(p)
		if err != nil {
			return nil // not ELF: data such as /etc/protocols
		}
		defer f.Close()
		rel, _ := filepath.Rel(root, p)
		if f.Machine != machine {
			t.Errorf("%s is built for %s, want %s", rel, f.Machine, machine)
			return nil
		}
		files = append(files, rel)
		needed, _ := f.ImportedLibraries()
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b := make([]byte, prog.Filesz)
				prog.ReadAt(b, 0)
				needed = append(needed, strings.TrimRight(string(b), "\x00"))
			}
		}
		for _, lib := range needed {
			if !libraryIn(root, lib, triplet) {
				t.Errorf("%s loads %s, which is not in the image", rel, lib)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return files
}

// libraryIn says whether lib (a name, or the interpreter's absolute path)
// resolves in root, through links relative to root.
func libraryIn(root, lib, triplet string) bool {
	candidates := []string{lib}
	if !path.IsAbs(lib) {
		candidates = []string{"/lib/" + triplet + "/" + lib, "/usr/lib/" + triplet + "/" + lib}
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(root, resolveIn(root, c))); err == nil {
			return true
		}
	}
	return false
}

// resolveIn follows the symbolic links of p inside root, as a loader
// chrooted there would.
func resolveIn(root, p string) string {
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0 && hops < 40; hops++ {
		next := path.Join(cur, parts[0])
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			cur, parts = next, parts[1:]
			continue
		}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		parts = append(strings.Split(strings.TrimPrefix(path.Clean(target), "/"), "/"), parts[1:]...)
		cur = "/"
	}
	return cur
}
