#!/usr/bin/env bash
# A real lakectl workflow on a throw-away embedded lake: `make demo` runs it with the venv's
# lakectl on PATH. Every command is printed before it runs.
set -euo pipefail

export LAKECTL_HOME="$(mktemp -d "${TMPDIR:-/tmp}/lakectl-demo.XXXXXX")"
export LAKECTL_COMMITTER="demo"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/lakectl-demo-data.XXXXXX")"
trap 'rm -rf "$LAKECTL_HOME" "$WORK"' EXIT

if [ -t 1 ]; then BOLD=$'\033[1m' CYAN=$'\033[36m' PLAIN=$'\033[0m'; else BOLD="" CYAN="" PLAIN=""; fi

run() {
    local shown="" arg
    for arg in "$@"; do
        if [[ "$arg" =~ [^-A-Za-z0-9_./:=@~^+,] ]]; then shown+=" '$arg'"; else shown+=" $arg"; fi
    done
    printf '\n%s$%s%s\n' "$BOLD" "$shown" "$PLAIN"
    "$@"
}

say() {
    printf '\n%s# %s%s\n' "$CYAN" "$*" "$PLAIN"
}

say "A small dataset: a few CSV files in directories"
mkdir -p "$WORK/data/sales" "$WORK/data/customers"
printf 'id,region,amount\n1,north,100\n2,south,250\n3,east,75\n' >"$WORK/data/sales/2024-01.csv"
printf 'id,region,amount\n4,north,310\n5,west,20\n' >"$WORK/data/sales/2024-02.csv"
printf 'id,name\n1,Ada\n2,Grace\n3,Edsger\n' >"$WORK/data/customers/customers.csv"
printf 'region,manager\nnorth,Ann\nsouth,Bob\n' >"$WORK/data/regions.csv"
run find "$WORK/data" -type f

say "Create the lake and a repository"
run lakectl init
run lakectl repo create lakefs://sales
run lakectl fs upload -r --source "$WORK/data" lakefs://sales/main/data/
run lakectl diff lakefs://sales/main
run lakectl commit lakefs://sales/main -m "Raw data" --meta source=demo

say "Work on a branch: change a file, add one, remove one"
run lakectl branch create lakefs://sales/cleanup --source lakefs://sales/main
printf 'id,region,amount\n1,north,100\n2,south,250\n3,east,80\n' >"$WORK/2024-01-fixed.csv"
run lakectl fs upload --source "$WORK/2024-01-fixed.csv" lakefs://sales/cleanup/data/sales/2024-01.csv
printf 'id,region,amount\n6,south,45\n' >"$WORK/2024-03.csv"
run lakectl fs upload --source "$WORK/2024-03.csv" lakefs://sales/cleanup/data/sales/2024-03.csv
run lakectl fs rm lakefs://sales/cleanup/data/regions.csv
run lakectl diff lakefs://sales/cleanup
run lakectl commit lakefs://sales/cleanup -m "Fix January, add March, drop regions"

say "Compare and merge back"
run lakectl diff lakefs://sales/main lakefs://sales/cleanup
run lakectl merge lakefs://sales/cleanup lakefs://sales/main
run lakectl log lakefs://sales/main --amount 5
run lakectl fs ls lakefs://sales/main/data/
run lakectl fs ls -r lakefs://sales/main/data/
run lakectl fs cat lakefs://sales/main/data/sales/2024-01.csv

say "A conflict: both branches change the same file"
run lakectl branch create lakefs://sales/eu --source lakefs://sales/main
printf 'id,name\n1,Ada\n2,Grace\n3,Edsger\n4,Barbara\n' >"$WORK/customers-main.csv"
printf 'id,name\n1,Ada Lovelace\n2,Grace Hopper\n3,Edsger Dijkstra\n' >"$WORK/customers-eu.csv"
run lakectl fs upload --source "$WORK/customers-main.csv" lakefs://sales/main/data/customers/customers.csv
run lakectl commit lakefs://sales/main -m "Add a customer"
run lakectl fs upload --source "$WORK/customers-eu.csv" lakefs://sales/eu/data/customers/customers.csv
run lakectl commit lakefs://sales/eu -m "Full names"
say "The merge stops (exit 5) and names the conflicting path; nothing changes on main"
set +e
run lakectl merge lakefs://sales/eu lakefs://sales/main
status=$?
set -e
echo "exit code: $status"
[ "$status" -eq 5 ]
say "Resolve it: keep the source's version of every conflicting path"
run lakectl merge lakefs://sales/eu lakefs://sales/main --strategy source-wins -m "Merge eu (full names win)"
run lakectl fs cat lakefs://sales/main/data/customers/customers.csv
run lakectl log lakefs://sales/main --amount 3 --first-parent

say "Machines read JSON"
run lakectl show commit lakefs://sales/main --json
run lakectl tag create lakefs://sales/v1 lakefs://sales/main
run lakectl tag list lakefs://sales

say "Done: the lake at $LAKECTL_HOME is removed on exit"
