#!/usr/bin/env bash
# Fails, naming them, when git tracks build output: anything under bin/ or
# .cache/, a BPF object or the Go binding bpf2go generates for it, a
# compiled test, or any ELF file (a binary built at the root and added by
# mistake). What `make build` makes is rebuilt from the tree, never kept in
# git. Run by `make unit-test`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "check-tracked: $(pwd) is not a git checkout: what is tracked cannot be checked" >&2
	exit 1
fi
found=0
while IFS= read -r -d '' f; do
	case $f in
	bin/* | .cache/* | *_bpfel.go | *_bpfel.o | *_bpfeb.go | *_bpfeb.o | *.o | *.test) ;;
	*)
		# The ELF magic, read by the shell itself (a process per file is
		# seconds over the tree).
		magic=
		[ -f "$f" ] && LC_ALL=C IFS= read -r -N4 magic <"$f" 2>/dev/null || true
		[ "$magic" = $'\x7fELF' ] || continue
		;;
	esac
	echo "check-tracked: build output tracked by git: $f" >&2
	found=1
done < <(git ls-files -z)
exit $found
