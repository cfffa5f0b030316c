#!/usr/bin/env bash
# Builds the Kubernetes components the cluster lab runs (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy) and kubectl,
# which its tests use as a user does, into DIR/bin
# from k8s.io/kubernetes through the Go module proxy: nothing is pulled from
# a release bucket or a registry.
#
# k8s.io/kubernetes cannot be required as it is: its go.mod replaces the
# k8s.io/* staging modules by directories of its own tree. A wrapper module
# in DIR/mod requires it and replaces each staging module by the release of
# it that goes with KUBE_VERSION (v1.X.Y goes with v0.X.Y), the list read
# from kubernetes' own go.mod. The version variables are set as
# hack/lib/version.sh sets them, so that the components report v1.X.Y.
# A stamp in DIR/bin keeps a finished build of these components at that
# version: run again, it returns at once.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
dir=${1:?usage: scripts/kube.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
stamp="$dir/bin/.built-$KUBE_VERSION-$(echo "${COMPONENTS[*]}" | sha256sum | cut -c1-8)"
[ -f "$stamp" ] && exit 0

staging=v0.${KUBE_VERSION#v1.}
mod="$dir/mod"
rm -rf "$mod" "$dir/bin"
mkdir -p "$mod" "$dir/bin"
cd "$mod"
kube_gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
[ -f "$kube_gomod" ] || { echo "kube: no go.mod for k8s.io/kubernetes@$KUBE_VERSION" >&2; exit 1; }
go_version=$(sed -n 's/^go //p' "$kube_gomod")
{
	echo "module nettrace.test/kube"
	echo "go $go_version"
	echo "require k8s.io/kubernetes $KUBE_VERSION"
	sed -n 's#^\s*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$kube_gomod" |
		while read -r m; do echo "replace $m => $m $staging"; done
} > go.mod
# The wrapper's one file names every component, so that `go mod tidy`
# keeps what their main packages need.
{
	echo "//go:build tools"
	echo "package kube"
	echo "import ("
	for c in "${COMPONENTS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
	echo ")"
} > tools.go
go mod tidy

IFS=. read -r major minor _ <<< "${KUBE_VERSION#v}"
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	ldflags+=" -X '$pkg.gitVersion=$KUBE_VERSION' -X '$pkg.gitMajor=$major' -X '$pkg.gitMinor=$minor'"
	ldflags+=" -X '$pkg.gitTreeState=clean' -X '$pkg.buildDate=1970-01-01T00:00:00Z'"
done
pkgs=()
for c in "${COMPONENTS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
# One go build for all: the packages they share compile once, in parallel.
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/bin/" "${pkgs[@]}"
touch "$stamp"
