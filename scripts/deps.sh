#!/usr/bin/env bash
# Installs what building and testing nettrace need, from Debian's packages,
# when it is missing; with "bench", also what scripts/bench needs. Safe to
# run repeatedly.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have clang || need+=(clang)
have llvm-strip || need+=(llvm)
[ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
have bpftool || [ -x /usr/sbin/bpftool ] || need+=(bpftool)
have ip || need+=(iproute2)
have bridge || need+=(iproute2)
have iptables || need+=(iptables)
have nft || need+=(nftables)
have nc || need+=(netcat-openbsd)
have tshark || need+=(tshark)
have setpriv || need+=(util-linux)
have qemu-system-x86_64 || need+=(qemu-system-x86)
# The arm64 guest (scripts/vmtest/run.sh 6.12-arm64) and the image's arm64
# half take arm64's kernel and programs from Debian's arm64 packages,
# unpacked, never installed: dpkg must know the architecture for apt to
# list them.
have qemu-system-aarch64 || need+=(qemu-system-arm)
foreign=""
dpkg --print-foreign-architectures | grep -qx arm64 || [ "$(dpkg --print-architecture)" = arm64 ] || foreign=arm64
[ -x /bin/busybox ] || need+=(busybox-static)
have cpio || need+=(cpio)
have depmod || need+=(kmod)
# The reference CNI plugins (bridge, host-local, portmap), which the tests
# call through libcni as a container runtime does.
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
# flannel's store, for the test that runs flanneld itself; containerd and
# runc, for the test that runs pod sandboxes through containerd's CRI
# plugin. Their packages' services are not started (see policy-rc.d
# below); the tests run their own, in a lab namespace.
have etcd || need+=(etcd-server)
have etcdctl || need+=(etcd-client)
have containerd || need+=(containerd)
have runc || need+=(runc)
# podman builds nettrace's image (scripts/image.sh) and runs it, for the
# test that proves the privileges deploy/ documents.
have podman || need+=(podman)
# Chromium opens the HTML report headless, in the test that checks what a
# browser shows of it (test/html_test.go) and in scripts/bench/html-page.sh.
have chromium || need+=(chromium)
if [ "${1:-}" = bench ]; then
	have iperf3 || need+=(iperf3)
	have tcpdump || need+=(tcpdump)
	have bc || need+=(bc)
fi

if [ ${#need[@]} -gt 0 ] || [ -n "$foreign" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing ${need[*]} ${foreign:+(and the $foreign architecture in dpkg)}; run as root to install them" >&2
		exit 1
	fi
	[ -z "$foreign" ] || dpkg --add-architecture "$foreign"
	echo "deps: installing ${need[*]}"
	# Packages such as etcd-server and containerd start their service when
	# installed; the tests run their own, in lab namespaces, and nothing may
	# be left running on the host. policy-rc.d tells Debian's maintainer
	# scripts not to start services (ours already has one).
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	[ ${#need[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! have go && [ ! -x /usr/local/go/bin/go ]; then
	echo "deps: Go is not installed (expected at /usr/local/go)" >&2
	exit 1
fi
