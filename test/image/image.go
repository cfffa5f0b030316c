// Package image writes OCI image archives from files of this machine, for
// `ctr images import`: the tests' pods run images built here, because
// nothing can be pulled.
package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
)

// Image is a one-layer image: Files maps a path in the image (no leading
// slash) to a file of this machine, copied with mode 0755; Entrypoint is
// the image's command.
type Image struct {
	Name       string // as containerd will know it, e.g. nettrace.test/pause:1
	Files      map[string]string
	Entrypoint []string
}

// Write writes img as an OCI image layout archive at dst.
func Write(dst string, img Image) error {
	layer, err := img.layer()
	if err != nil {
		return err
	}
	blobs := map[string][]byte{}
	blob := func(b []byte) string {
		d := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
		blobs[d] = b
		return d
	}
	layerDigest := blob(layer)
	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": img.Entrypoint},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	configDigest := blob(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": configDigest, "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": len(layer)}},
	})
	manifestDigest := blob(manifest)
	tag := img.Name[strings.LastIndex(img.Name, ":")+1:]
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []any{map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifestDigest, "size": len(manifest),
			"annotations": map[string]string{"io.containerd.image.name": img.Name, "org.opencontainers.image.ref.name": tag}}},
	})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	add := func(name string, b []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))})
		tw.Write(b)
	}
	add("oci-layout", []byte(`{"imageLayoutVersion": "1.0.0"}`))
	add("index.json", index)
	for d, b := range blobs {
		add("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), b)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, out.Bytes(), 0o644)
}

// layer is the image's one layer: its files and their directories.
func (img Image) layer() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(img.Files))
	for name := range img.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, name := range names {
		b, err := os.ReadFile(img.Files[name])
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		for _, d := range parents(name) {
			if !dirs[d] {
				dirs[d] = true
				tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755})
			}
		}
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))})
		tw.Write(b)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parents lists name's directories, outermost first.
func parents(name string) []string {
	var out []string
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}
