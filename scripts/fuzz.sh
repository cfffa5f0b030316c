#!/usr/bin/env bash
# Fuzzes the recording reader for a bounded time, then keeps the corpus it
# found beside the test (pkg/trace/testdata/fuzz), where every plain
# `go test` replays it as regression input.
set -euo pipefail
FUZZTIME=${FUZZTIME:-30s}
go test -run '^$' -fuzz '^FuzzReader$' -fuzztime "$FUZZTIME" ./pkg/trace
cache="$(go env GOCACHE)/fuzz/github.com/nettrace-dev/nettrace/pkg/trace/FuzzReader"
keep=pkg/trace/testdata/fuzz/FuzzReader
mkdir -p "$keep"
if [ -d "$cache" ]; then
	cp -n "$cache"/* "$keep"/ 2>/dev/null || true
fi
echo "fuzz: $(ls "$keep" | wc -l) corpus entries kept in $keep"
