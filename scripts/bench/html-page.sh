#!/usr/bin/env bash
# How long a large run's HTML page keeps its reader waiting: a synthetic
# recording of about FLOWS flows (scripts/bench/genrec: the incidents'
# healthy twins, and the incidents themselves every hundredth round, so
# about one flow in a hundred has a finding), replayed as a page
# (replay -o html), opened ROUNDS times in headless Chromium
# (scripts/bench/pageload). Prints the replay's time, the page's size and
# the median time to its load event and to its first painted frame.
#
# Usage: scripts/bench/html-page.sh [FLOWS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
FLOWS=${1:-10000}
ROUNDS=${2:-7}
NETTRACE=${NETTRACE:-bin/nettrace}
command -v chromium >/dev/null || { echo "html-page: needs chromium (scripts/deps.sh installs it)" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
go build -o "$OUT/genrec" ./scripts/bench/genrec
go build -o "$OUT/pageload" ./scripts/bench/pageload
# genrec's connections average 7.3 events and about 1.02 flows.
"$OUT/genrec" -o "$OUT/rec.ntrace" -n $((FLOWS * 73 / 10)) -failing-every 100 >/dev/null
start=$(date +%s.%N)
"$NETTRACE" replay -o html "$OUT/rec.ntrace" > "$OUT/page.html" 2>"$OUT/err"
end=$(date +%s.%N)
sed -n 's/^nettrace: \([0-9]* flows\).*findings: \(.*\)$/== \1; findings: \2/p' "$OUT/err"
awk -v s="$start" -v e="$end" -v b="$(stat -c %s "$OUT/page.html")" 'BEGIN { printf "== replay -o html: %.2f s, page %d KB\n", e - s, b / 1024 }' 
"$OUT/pageload" -rounds "$ROUNDS" "$OUT/page.html" | sed 's/^[^:]*: /== page: /'
