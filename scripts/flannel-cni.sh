#!/usr/bin/env bash
# Builds flannel's CNI plugin (the "flannel" type kube-flannel's CNI
# configuration names) to OUTPUT, for the cluster lab.
#
# Flannel ships it from github.com/flannel-io/cni-plugin, which our module
# proxy refuses at every version, and Debian's containernetworking-plugins
# does not carry it. The plugin lived in containernetworking/plugins
# (plugins/meta/flannel) until v0.9.1, which the proxy serves: the same
# plugin, before flannel forked it; it reads flanneld's subnet file and
# delegates to the bridge and host-local plugins as the fork does.
set -euo pipefail
VERSION=v0.9.1
out=$(realpath -m "${1:?usage: scripts/flannel-cni.sh OUTPUT}")
stamp="$out.version"
if [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; then
	exit 0
fi
gobin=$(mktemp -d)
trap 'rm -rf "$gobin"' EXIT
CGO_ENABLED=0 GOBIN="$gobin" go install -trimpath "github.com/containernetworking/plugins/plugins/meta/flannel@$VERSION"
mkdir -p "$(dirname "$out")"
mv "$gobin/flannel" "$out"
echo "$VERSION" > "$stamp"
