#!/usr/bin/env bash
# Runs the host's integration tests (./test/...), `make integration-test`.
#
# The cluster tests (TestCluster*) need the Kubernetes components, whose
# cold build (`make kube`) is about 25 CPU-minutes, while the other tests
# leave about half of this machine's CPU idle waiting on packets and
# processes. So the build runs in the background at nice 19 while the
# other tests run, and the cluster tests run once it is done: a fresh
# machine pays for the build in the other tests' idle time instead of
# before them (on a warm machine the build returns at once). At nice 19
# the build takes only the CPU that the tests and their own cold build
# leave.
#
# A failure ends with what each failed test said (scripts/failed), which
# the -v log's thousands of lines bury.
set -euo pipefail

timeout=${INTEGRATION_TIMEOUT:-40m}
mkdir -p .cache
log=.cache/integration.log
build_log=.cache/kube-build.log
: > "$log"

# Its own process group, so that an interrupted run stops the whole build.
setsid nice -n 19 make -s kube > "$build_log" 2>&1 &
build=$!
trap 'kill -- -"$build" 2>/dev/null || true' EXIT

tests() {
	go test -count=1 -timeout "$timeout" -v "$@" ./test/... 2>&1 | tee -a "$log"
}

failed=0
tests -skip '^TestCluster' || failed=1
if ! wait "$build"; then
	echo "integration: make kube failed, so the cluster tests cannot run; its log's end ($build_log):" >&2
	tail -n 40 "$build_log" >&2
	exit 1
fi
tests -run '^TestCluster' || failed=1
if [ "$failed" = 1 ]; then
	go tool test2json < "$log" | go run ./scripts/failed
	exit 1
fi
