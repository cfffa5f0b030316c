#!/usr/bin/env bash
# Builds nettrace's container image offline, from what this machine has:
# a static nettrace and the two programs it runs, with the libraries and
# data they load, taken from Debian's own iptables and nftables packages
# (installed by scripts/deps.sh):
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
# Usage: scripts/image.sh [NAME]   (default nettrace:dev)
set -euo pipefail
name=${1:-nettrace:dev}
cd "$(dirname "$0")/.."
command -v podman >/dev/null || { echo "image: podman is missing (scripts/deps.sh image installs it)" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/etc"

CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$root/usr/bin/nettrace" ./cmd/nettrace

# copy puts a file at the same path in the image, and the shared libraries
# ldd says it loads (the dynamic loader with them).
copy() {
	local f
	for f in "$@"; do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
		ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
			[ -e "$root$lib" ] && continue
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
	done
}
xtables=$(readlink -f "$(command -v iptables-save)")
copy "$xtables" "$(readlink -f "$(command -v nft)")"
# The extensions iptables-save loads to print each match and target.
copy /usr/lib/x86_64-linux-gnu/xtables/*.so
for tool in iptables-save ip6tables-save; do
	ln -s "$(basename "$xtables")" "$root/usr/sbin/$tool"
done
cp /etc/protocols "$root/etc/protocols"
cp /bin/busybox "$root/usr/bin/busybox"
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
podman build --quiet --timestamp 0 --tag "$name" --file "$root/Containerfile" "$root" >/dev/null
echo "image: built $name ($(podman image inspect --format '{{.Size}}' "$name") bytes)"
