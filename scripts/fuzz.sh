#!/usr/bin/env bash
# Fuzzes for a bounded time each: the recording reader, whose corpus is
# kept beside its test (pkg/trace/testdata/fuzz) so that every plain
# `go test` replays it, and the correlator's promise that connections never
# share a flow whatever addresses the kernel reuses (its inputs are seeds
# of a generator; TestInterleavedConnectionsNeverShareAFlow replays 200).
set -euo pipefail
FUZZTIME=${FUZZTIME:-20s}
go test -run '^$' -fuzz '^FuzzReader$' -fuzztime "$FUZZTIME" ./pkg/trace
cache="$(go env GOCACHE)/fuzz/github.com/nettrace-dev/nettrace/pkg/trace/FuzzReader"
keep=pkg/trace/testdata/fuzz/FuzzReader
mkdir -p "$keep"
if [ -d "$cache" ]; then
	cp -n "$cache"/* "$keep"/ 2>/dev/null || true
fi
echo "fuzz: $(ls "$keep" | wc -l) corpus entries kept in $keep"
go test -run '^$' -fuzz '^FuzzInterleavedConnectionsNeverShareAFlow$' -fuzztime "$FUZZTIME" ./pkg/flow
