#!/usr/bin/env bash
# Unpacks the guest's userland for another architecture from Debian's
# packages: the programs the tests run (busybox, ip, bridge, iptables, nft,
# the CNI plugins, etcd) and every package they depend on, for ARCH, into
# DIR. Nothing is installed or run: dpkg -x only unpacks, so an arm64
# userland is made on an amd64 host without emulation. scripts/vmtest/run.sh
# copies from DIR what the guest needs, with the libraries each program
# loads. The amd64 guest takes the host's own programs instead.
#
# Usage: scripts/vmtest/sysroot.sh ARCH DIR (kept in DIR until the list
# changes; "dpkg --add-architecture ARCH" and "apt-get update" first).
set -euo pipefail
ARCH=${1:?usage: $0 ARCH DIR}
DIR=${2:?usage: $0 ARCH DIR}
PACKAGES="busybox-static iproute2 iptables nftables containernetworking-plugins etcd-server etcd-client"
stamp="$DIR/.packages"
if [ "$(cat "$stamp" 2>/dev/null)" = "$PACKAGES" ]; then
	exit 0
fi
dpkg --print-foreign-architectures | grep -qx "$ARCH" || [ "$(dpkg --print-architecture)" = "$ARCH" ] ||
	{ echo "sysroot: $ARCH is not one of dpkg's architectures (dpkg --add-architecture $ARCH; apt-get update)" >&2; exit 1; }
# The dependencies of ARCH's packages, ARCH's only: the others apt names
# are the host's or architecture-independent (debconf, netbase), which no
# program the guest runs loads.
names=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
	--no-replaces --no-enhances $(printf "%s:$ARCH " $PACKAGES) | grep -E "^[a-z0-9][^ ]*:$ARCH\$" | sort -u)
[ -n "$names" ] || { echo "sysroot: apt knows no $ARCH packages (apt-get update?)" >&2; exit 1; }
rm -rf "$DIR"
mkdir -p "$DIR/.debs"
echo "sysroot: fetching $(echo "$names" | wc -l) $ARCH packages"
(cd "$DIR/.debs" && apt-get download $names 2>/dev/null) ||
	{ echo "sysroot: apt-get download of $ARCH packages failed" >&2; exit 1; }
for deb in "$DIR"/.debs/*.deb; do dpkg -x "$deb" "$DIR"; done
rm -rf "$DIR/.debs"
# /usr merged, as on the host and every Debian 12 system: a program is at
# the same path in both userlands (/usr/sbin/ip, which iproute2 unpacks
# at /bin/ip).
for d in bin sbin lib; do
	if [ -d "$DIR/$d" ] && [ ! -L "$DIR/$d" ]; then
		mkdir -p "$DIR/usr/$d"
		cp -a "$DIR/$d/." "$DIR/usr/$d/"
		rm -rf "${DIR:?}/$d"
	fi
	ln -sfn "usr/$d" "$DIR/$d"
done
# Links to an absolute path (iproute2's /sbin/ip -> /bin/ip) made
# relative, so that they resolve inside DIR and never to the host's files.
find "$DIR" -type l -lname '/*' | while read -r link; do
	ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$DIR$(readlink "$link")")" "$link"
done
echo "$PACKAGES" > "$stamp"
