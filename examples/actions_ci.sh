#!/usr/bin/env bash
# A CI gate with lakeFS actions on a throw-away embedded lake: a pre-merge hook validates the
# orders table (schema and row count, with pyarrow) and blocks the merge of bad data into main.
# Needs lakectl and pyarrow (the venv's python and lakectl on PATH).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LAKECTL_HOME="$(mktemp -d "${TMPDIR:-/tmp}/lakectl-actions.XXXXXX")"
export LAKECTL_COMMITTER="ci"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/lakectl-actions-data.XXXXXX")"
trap 'rm -rf "$LAKECTL_HOME" "$WORK"' EXIT
PYTHON="$(command -v python3 || command -v python)"
R=lakefs://orders-lake

run() { printf '\n$ %s\n' "$*"; "$@"; }
table() {  # table FILE ROWS [BAD]: an orders Parquet file of ROWS rows; BAD: amount as text
    "$PYTHON" - "$1" "$2" "${3:-}" <<'PY'
import sys, pyarrow as pa, pyarrow.parquet as pq
path, rows, bad = sys.argv[1], int(sys.argv[2]), sys.argv[3]
amount = [str(i * 1.5) for i in range(rows)] if bad else [i * 1.5 for i in range(rows)]
pq.write_table(pa.table({"order_id": list(range(rows)), "amount": amount, "region": ["north"] * rows}), path)
PY
}

run lakectl repo create "$R"
sed -e "s#\"PYTHON\"#\"$PYTHON\"#" -e "s#\"VALIDATOR\"#\"$HERE/actions/validate_table.py\"#" \
    "$HERE/actions/orders-quality.yaml" >"$WORK/orders-quality.yaml"
run lakectl actions validate "$WORK/orders-quality.yaml"
run lakectl fs upload "$R/main/_lakefs_actions/orders-quality.yaml" -s "$WORK/orders-quality.yaml"
run lakectl commit "$R/main" -m "CI: gate merges of the orders table"

echo; echo "# A good batch merges"
table "$WORK/good.parquet" 5
run lakectl branch create "$R/ingest-1" -s "$R/main"
run lakectl fs upload "$R/ingest-1/tables/orders/part-0.parquet" -s "$WORK/good.parquet"
run lakectl commit "$R/ingest-1" -m "orders batch 1"
run lakectl merge "$R/ingest-1" "$R/main"

echo; echo "# A bad batch (amount written as text) is refused: main does not change"
table "$WORK/bad.parquet" 5 bad
before="$(lakectl branch show "$R/main" --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["commit_id"])')"
run lakectl branch create "$R/ingest-2" -s "$R/main"
run lakectl fs upload "$R/ingest-2/tables/orders/part-1.parquet" -s "$WORK/bad.parquet"
run lakectl commit "$R/ingest-2" -m "orders batch 2"
set +e
printf '\n$ lakectl merge %s %s\n' "$R/ingest-2" "$R/main"
lakectl merge "$R/ingest-2" "$R/main"
code=$?
set -e
after="$(lakectl branch show "$R/main" --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["commit_id"])')"
echo "merge exit status: $code (6: a pre-merge hook refused it)"
[ "$code" -eq 6 ] && [ "$before" = "$after" ] || { echo "expected a refused merge and main unchanged"; exit 1; }

echo; echo "# What ran, and what the hook said"
run lakectl actions runs list "$R" --branch main
run_id="$(lakectl actions runs list "$R" --branch main --amount 1 --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[0]["run_id"])')"
run lakectl actions runs describe "$R" "$run_id"
run lakectl cat-hook-output "$R" "$run_id" 0000_0000
