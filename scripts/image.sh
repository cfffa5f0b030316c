#!/usr/bin/env bash
# Builds nettrace's container image offline, for amd64 and arm64 under one
# manifest list: a static nettrace and the two programs it runs, with the
# libraries and data they load, taken from Debian's own iptables and
# nftables packages (the host's, installed by scripts/deps.sh, for its
# architecture; the other's unpacked by scripts/vmtest/sysroot.sh):
#   iptables-save, ip6tables-save  the rule watcher's reading of each
#                                  namespace's iptables rules (nft backend,
#                                  with the match and target extensions)
#   nft                            its reading of native nftables rules
#   /etc/protocols                 iptables-save names protocols by it
#   tar (busybox, static)          kubectl cp of the recordings
# Nothing else: no shell, no package manager. The image is reproducible:
# the binary is built with -trimpath, podman build --timestamp 0 fixes
# every time in it.
#
# Usage: scripts/image.sh [NAME]   (default nettrace:dev): the manifest
#   list NAME, its images tagged NAME-amd64 and NAME-arm64
#        scripts/image.sh --remove NAME: removes them all
# ARCHES: the architectures it holds (default "amd64 arm64").
set -euo pipefail
cd "$(dirname "$0")/.."

# remove NAME: the manifest list and its images, so that a build replaces
# them and leaves no image behind unnamed.
remove() {
	local arch
	! podman manifest exists "$1" || podman manifest rm "$1" >/dev/null
	! podman image exists "$1" || podman rmi --force "$1" >/dev/null
	for arch in amd64 arm64; do
		! podman image exists "$1-$arch" || podman rmi --force "$1-$arch" >/dev/null
	done
}
if [ "${1:-}" = --remove ]; then
	remove "${2:?usage: $0 --remove NAME}"
	exit 0
fi
name=${1:-nettrace:dev}
ARCHES=${ARCHES:-amd64 arm64}
. scripts/userland.sh
command -v podman >/dev/null || { echo "image: podman is missing (scripts/deps.sh image installs it)" >&2; exit 1; }

# stage ARCH ROOT: the image's filesystem for ARCH under ROOT.
stage() {
	local arch=$1 root=$2 tool
	userland "$arch"
	mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/etc"
	CGO_ENABLED=0 GOARCH=$arch go build -trimpath -ldflags '-s -w' -o "$root/usr/bin/nettrace" ./cmd/nettrace
	copy_with_libs "$root" /usr/sbin/xtables-nft-multi usr/sbin/xtables-nft-multi
	copy_with_libs "$root" /usr/sbin/nft usr/sbin/nft
	copy_xtables "$root"
	for tool in iptables-save ip6tables-save; do
		ln -s xtables-nft-multi "$root/usr/sbin/$tool"
	done
	cp /etc/protocols "$root/etc/protocols"
	cp "$SYSROOT/bin/busybox" "$root/usr/bin/busybox"
	ln -s busybox "$root/usr/bin/tar"
	cat > "$root/Containerfile" <<'END'
FROM scratch
COPY . /
ENV PATH=/usr/bin:/usr/sbin
ENTRYPOINT ["/usr/bin/nettrace"]
CMD ["--help"]
END
	# The Containerfile is in the context; .containerignore keeps it out.
	echo Containerfile > "$root/.containerignore"
}

# One image per architecture, under a manifest list of the given name: a
# node pulls its own. FROM scratch with COPY runs nothing, so the arm64
# image is built here without emulation.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
remove "$name"
podman manifest create "$name" >/dev/null
for arch in $ARCHES; do
	stage "$arch" "$work/$arch"
	podman build --quiet --timestamp 0 --platform "linux/$arch" --manifest "$name" --tag "$name-$arch" \
		--file "$work/$arch/Containerfile" "$work/$arch" >/dev/null
done
echo "image: built $name for $ARCHES ($(podman manifest inspect "$name" | grep -c '"digest"') images)"
