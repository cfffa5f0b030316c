#!/usr/bin/env bash
# Builds flanneld, flannel's node daemon, from flannel's own Go module, for
# the integration test that runs incident 1 on flannel itself
# (test/flannel_test.go). Usage: scripts/flanneld.sh OUTPUT
#
# One change to flannel's source: main.go's import of the Tencent VPC
# backend is dropped, because our module proxy refuses the Tencent Cloud SDK
# it needs (tencentcloud-sdk-go/tencentcloud/vpc: 403). The test uses the
# vxlan backend; nothing else is touched.
set -euo pipefail
VERSION=v0.28.10
out=$(realpath -m "${1:?usage: scripts/flanneld.sh OUTPUT}")
stamp="$out.version"
if [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; then
	exit 0
fi
src=$(mktemp -d)
trap 'chmod -R u+w "$src"; rm -rf "$src"' EXIT
dir=$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "github.com/flannel-io/flannel@$VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "flanneld: flannel $VERSION was not downloaded" >&2; exit 1; }
cp -r "$dir/." "$src/"
chmod -R u+w "$src"
grep -q 'pkg/backend/tencentvpc"' "$src/main.go" ||
	{ echo "flanneld: flannel $VERSION's main.go no longer imports the tencentvpc backend; revisit this script" >&2; exit 1; }
sed -i '/pkg\/backend\/tencentvpc"/d' "$src/main.go"
echo "flanneld: building flannel $VERSION (vxlan backend and the others but Tencent VPC)"
mkdir -p "$(dirname "$out")"
(cd "$src" && go build -trimpath -o "$out" .)
echo "$VERSION" > "$stamp"
