#!/bin/sh
# Runs nettrace's image (make image) under podman on a node, with the
# privileges and mounts it needs and no more (deploy/README.md says why
# each one); the DaemonSet asks for the same.
#
# Usage: deploy/podman-run.sh NETTRACE-ARGUMENTS...
#   deploy/podman-run.sh watch --netns all 'host 10.96.0.10'
#   deploy/podman-run.sh record --netns all --flight /var/lib/nettrace/flight
#
# Environment:
#   IMAGE         the image (default nettrace:dev)
#   NETTRACE_DIR  where recordings go, mounted read-write at the same path
#                 (default /var/lib/nettrace)
#   CNI_CACHE     the runtime's libcni cache, for pod names
#                 (default /var/lib/cni/results)
#   PODMAN_GLOBAL podman's own options (for example --runtime runc)
#   PODMAN_RUN    more options of podman run (for example --name)
set -eu
IMAGE=${IMAGE:-nettrace:dev}
NETTRACE_DIR=${NETTRACE_DIR:-/var/lib/nettrace}
CNI_CACHE=${CNI_CACHE:-/var/lib/cni/results}
mkdir -p "$NETTRACE_DIR"
# shellcheck disable=SC2086 # the option lists split into words
exec podman ${PODMAN_GLOBAL:-} run --rm ${PODMAN_RUN:-} \
	--network host --pid host --read-only \
	--cap-drop all --cap-add SYS_ADMIN,NET_ADMIN,SYS_PTRACE,SYSLOG \
	--volume /run/netns:/run/netns:ro,rslave \
	--volume /sys/kernel/security:/sys/kernel/security:ro \
	--volume "$CNI_CACHE:$CNI_CACHE:ro" \
	--volume "$NETTRACE_DIR:$NETTRACE_DIR" \
	"$IMAGE" "$@"
