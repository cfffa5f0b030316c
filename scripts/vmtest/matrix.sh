#!/usr/bin/env bash
# Boots every kernel of the matrix at once, each under its own qemu
# (scripts/vmtest/run.sh), and fails if any guest fails. The guests run in
# parallel because each is mostly emulation (TCG) and one alone leaves the
# machine's second core half idle; their outputs are shown one after the
# other as they finish, each under its kernel's name.
#
# Usage: scripts/vmtest/matrix.sh KERNEL[:SUITES]...
#   KERNEL as run.sh takes it (6.1, 6.12, a package, a bzImage); SUITES is
#   run.sh's VMTEST_SUITE (e.g. captures,busy-v4; default all).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || { echo "usage: $0 KERNEL[:SUITES]..." >&2; exit 2; }
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$OUT"' EXIT

# The guests build the same binaries: build them once, before they start.
CGO_ENABLED=0 go build -o /dev/null ./cmd/nettrace ./test/lab/ntlab || exit 1
CGO_ENABLED=0 go test -c -o /dev/null ./test || exit 1

specs=("$@") pids=()
for i in "${!specs[@]}"; do
	spec=${specs[$i]}
	kernel=${spec%%:*} suite=all
	[ "$kernel" = "$spec" ] || suite=${spec#*:}
	VMTEST_SUITE=$suite scripts/vmtest/run.sh "$kernel" > "$OUT/$i.out" 2>&1 &
	pids[$i]=$!
	echo "vmtest: started $kernel ($suite)"
done
# A failed guest's output is shown last, after the guests that passed, and
# the run ends with its failed tests' verdict lines: a CI log is often read
# from its end only, and must say there which test failed and why.
failed=()
for i in "${!specs[@]}"; do
	wait "${pids[$i]}"
	if [ $? -eq 0 ]; then
		echo "=== vmtest ${specs[$i]}"
		cat "$OUT/$i.out"
	else
		failed+=("$i")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	for i in "${failed[@]}"; do
		echo "=== vmtest ${specs[$i]} (FAILED)"
		cat "$OUT/$i.out"
	done
	for i in "${failed[@]}"; do
		echo "vmtest: FAILED on ${specs[$i]}:" >&2
		# What the failed tests said, not the guest's end that follows it
		# (the tests that ran last, which may have passed): which tests and
		# runs failed, then their last lines.
		sed '/^vmtest: the end of /,$d' "$OUT/$i.out" > "$OUT/$i.failed"
		grep -E -- '^--- .*(failed|did not finish)|^--- FAIL|^VMTEST RUN FAILED|^lab down:|^panic:|vmtest: FAIL' "$OUT/$i.failed" >&2
		# Each message with the first lines of its continuation (a
		# multi-line message's detail is indented deeper than its head).
		awk '/_test\.go:[0-9]+:/ {print; more = 12; next}
			more > 0 && /^        / {print; more--; next}
			{more = 0}' "$OUT/$i.failed" | tail -40 >&2
	done
	exit 1
fi
echo "vmtest: PASS on $*"
