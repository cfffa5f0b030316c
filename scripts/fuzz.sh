#!/usr/bin/env bash
# Fuzzes for a bounded time each: the recording reader, whose corpus is
# kept beside its test (pkg/trace/testdata/fuzz) so that every plain
# `go test` replays it, and the correlator's promise that connections never
# share a flow whatever addresses the kernel reuses (its inputs are seeds
# of a generator; TestInterleavedConnectionsNeverShareAFlow replays 200).
#
# Each target is bounded by a count of executions (about 20 s here), not by
# a duration: Go before 1.27 can fail a duration-bounded run with a bare
# "context deadline exceeded" when a worker is still busy as the time runs
# out (golang/go#75804), which made CI fail with no crasher to show.
set -euo pipefail
READER_EXECS=${READER_EXECS:-400000x}
FLOW_EXECS=${FLOW_EXECS:-10000x}
go test -run '^$' -fuzz '^FuzzReader$' -fuzztime "$READER_EXECS" ./pkg/trace
cache="$(go env GOCACHE)/fuzz/github.com/nettrace-dev/nettrace/pkg/trace/FuzzReader"
keep=pkg/trace/testdata/fuzz/FuzzReader
mkdir -p "$keep"
if [ -d "$cache" ]; then
	cp -n "$cache"/* "$keep"/ 2>/dev/null || true
fi
echo "fuzz: $(ls "$keep" | wc -l) corpus entries kept in $keep"
# The whole replay of a recording (reader, correlator, rules, text) within
# a bound of memory for the file's size (about 20 s).
go test -run '^$' -fuzz '^FuzzReplay$' -fuzztime "${REPLAY_EXECS:-30000x}" ./internal/engine
go test -run '^$' -fuzz '^FuzzInterleavedConnectionsNeverShareAFlow$' -fuzztime "$FLOW_EXECS" ./pkg/flow
go test -run '^$' -fuzz '^FuzzKernelHops$' -fuzztime "${HOPS_EXECS:-200000x}" ./pkg/event
