#!/usr/bin/env bash
# lakeFS's `lakectl`, as its documentation writes it: every form below is copied from the shape
# lakeFS documents (flags, argument order, URI forms), none adapted to lakectl. The test suite
# runs this script unchanged against an embedded lake and against a lakectl server; MODE says
# which ("embedded" or "remote") for the few commands only a server has.
#
#   REPO=forms-1 MODE=embedded bash lakefs_forms.sh
set -euo pipefail

R="lakefs://$REPO"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
expect() {  # expect <what> <needle> <text>: the text holds the needle
    case "$3" in *"$2"*) ;; *) printf 'FAILED: %s: %q not in:\n%s\n' "$1" "$2" "$3" >&2; exit 1 ;; esac
}

printf 'id,v\n1,a\n' >"$WORK/a.csv"
printf 'id,v\n2,b\n' >"$WORK/b.csv"
mkdir -p "$WORK/dir/sub"
printf 'x\n' >"$WORK/dir/x.txt"
printf 'y\n' >"$WORK/dir/sub/y.txt"

# Repositories
lakectl repo create "$R" "local://$REPO-storage" -d main
expect "repo show: storage namespace" "local://$REPO-storage" "$(lakectl repo show "$R" --json)"
expect "repo list --amount" "$REPO" "$(lakectl repo list --amount 1000)"
lakectl repo create-bare "$R-bare" "local://$REPO-bare" -d main

# Branches and objects
lakectl branch create "$R/dev" -s "$R/main"
lakectl branch create "$R/feature" --source "$R/main"
expect "branch list --amount" "dev" "$(lakectl branch list "$R" --amount 10)"
lakectl fs upload "$R/dev/data/a.csv" -s "$WORK/a.csv"
lakectl fs upload "$R/dev/data/b.csv" --source "$WORK/b.csv" --content-type text/csv
lakectl fs upload "$R/dev/tree/" -s "$WORK/dir" --recursive
expect "fs ls --recursive" "tree/sub/y.txt" "$(lakectl fs ls "$R/dev/" --recursive)"
expect "fs stat" "Physical Address" "$(lakectl fs stat "$R/dev/data/a.csv")"
[ "$(lakectl fs cat "$R/dev/data/a.csv")" = "$(cat "$WORK/a.csv")" ]
lakectl fs download "$R/dev/data/a.csv" "$WORK/a.back"
lakectl fs download "$R/dev/tree/" "$WORK/tree.back" --recursive --parallel 4
cmp "$WORK/dir/sub/y.txt" "$WORK/tree.back/sub/y.txt"
expect "diff of uncommitted changes" "data/a.csv" "$(lakectl diff "$R/dev")"

# Commits and history
lakectl commit "$R/dev" -m "add data" --meta owner=etl --meta job=1
lakectl fs upload "$R/dev/data/c.csv" -s "$WORK/b.csv"
lakectl commit "$R/dev" --allow-empty-message -m ""
expect "log --objects a,b" "add data" "$(lakectl log "$R/dev" --objects data/a.csv,data/b.csv)"
expect "log --prefixes p,q" "add data" "$(lakectl log "$R/dev" --prefixes data/,tree/ --amount 5)"
[ "$(lakectl log "$R/dev" --amount 1 --limit --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ]
expect "log --dot" "digraph" "$(lakectl log "$R/dev" --dot)"
expect "log --show-meta-range-id" "Meta Range ID" "$(lakectl log "$R/dev" --show-meta-range-id --amount 1)"
expect "log --since" "add data" "$(lakectl log "$R/dev" --since 2000-01-01T00:00:00Z)"
FIRST="$(lakectl log "$R/dev" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[1]["id"])')"
expect "log --after" "Repository created" "$(lakectl log "$R/dev" --after "$FIRST")"
expect "show commit --show-meta-range-id" "Meta Range ID" "$(lakectl show commit "$R/dev" --show-meta-range-id)"

# Diff, with lakeFS's ref expressions
lakectl fs upload "$R/dev/data/d.csv" -s "$WORK/a.csv"
expect "diff two refs" "data/a.csv" "$(lakectl diff "$R/main" "$R/dev")"
expect "diff ref@ ref\$ (uncommitted only)" "data/d.csv" "$(lakectl diff "$R/dev@" "$R/dev\$" --two-way)"
lakectl branch reset "$R/dev" --object data/d.csv --yes

# Tags
lakectl tag create "$R/v1" "$R/dev"
lakectl tag create "$R/v1" "$R/main" -f
expect "tag show" "commit" "$(lakectl tag show "$R/v1" --json)"
expect "tag list --amount" "v1" "$(lakectl tag list "$R" --amount 10)"

# Merge, squash, revert with a parent number, cherry-pick
lakectl merge "$R/dev" "$R/main" --strategy source-wins
MERGE="$(lakectl log "$R/main" --amount 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
lakectl fs upload "$R/feature/f.csv" -s "$WORK/a.csv"
lakectl commit "$R/feature" -m "feature"
lakectl merge "$R/feature" "$R/main" --squash
lakectl branch revert "$R/main" "$MERGE" -m 1 -y
lakectl fs upload "$R/feature/g.csv" -s "$WORK/b.csv"
lakectl commit "$R/feature" -m "one more"
lakectl cherry-pick "$R/feature" "$R/main"
expect "annotate" "one more" "$(lakectl annotate "$R/main/" -r)"

# Branch protection
lakectl branch-protect add "$R" 'prod*'
expect "branch-protect list" "prod*" "$(lakectl branch-protect list "$R")"
lakectl branch create "$R/prod-1" -s "$R/main"
if lakectl fs upload "$R/prod-1/x.csv" -s "$WORK/a.csv" 2>/dev/null; then echo "FAILED: protected branch written" >&2; exit 1; fi
lakectl merge "$R/dev" "$R/prod-1"
lakectl branch-protect delete "$R" 'prod*'

# Removing
lakectl fs rm "$R/dev/data/c.csv"
lakectl fs rm "$R/dev/tree/" --recursive
lakectl branch reset "$R/dev" --prefix tree/ -y
lakectl branch reset "$R/dev" --yes

# Refs dump and restore
lakectl refs-dump "$R" >"$WORK/manifest.json"
lakectl refs-restore "$R-bare" --manifest "$WORK/manifest.json"
[ "$(lakectl log "$R-bare/main" --json)" = "$(lakectl log "$R/main" --json)" ]

# Garbage-collection rules
printf '{"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 28}]}' >"$WORK/gc.json"
lakectl gc set-config "$R" -f "$WORK/gc.json"
expect "gc get-config" "21" "$(lakectl gc get-config "$R" -p)"
lakectl gc delete-config "$R"

# Global flags
expect "--base-uri" "a.csv" "$(lakectl --base-uri "$R" fs ls /dev/data/)"
expect "LAKECTL_BASE_URI" "a.csv" "$(LAKECTL_BASE_URI="$R/dev/" lakectl fs ls data/)"
lakectl --no-color --log-level error branch list "$R" >/dev/null
expect "completion" "lakectl" "$(lakectl completion bash)"
lakectl doctor >/dev/null

# Actions: a pre-create-tag webhook nobody answers refuses the tag; the run tells
cat >"$WORK/gate.yaml" <<'YAML'
name: gate tags
on:
  pre-create-tag:
hooks:
  - id: ask_nobody
    type: webhook
    properties:
      url: "http://127.0.0.1:9/closed"
      timeout: 5s
YAML
lakectl actions validate "$WORK/gate.yaml"
lakectl fs upload "$R/main/_lakefs_actions/gate.yaml" -s "$WORK/gate.yaml"
lakectl commit "$R/main" -m "gate tags"
if lakectl tag create "$R/gated" "$R/main" 2>/dev/null; then echo "FAILED: a refused tag was created" >&2; exit 1; fi
RUN="$(lakectl actions runs list "$R" --amount 1 | awk 'NR == 2 {print $1}')"
expect "actions runs list" "pre-create-tag" "$(lakectl actions runs list "$R" --amount 1)"
expect "actions runs describe" "ask_nobody" "$(lakectl actions runs describe "$R" "$RUN")"
expect "cat-hook-output" "http://127.0.0.1:9/closed" "$(lakectl cat-hook-output "$R" "$RUN" 0000_0000)"
lakectl fs rm "$R/main/_lakefs_actions/gate.yaml"
lakectl commit "$R/main" -m "no more gate"

# What only a server has
if [ "$MODE" = remote ]; then
    URL="$(lakectl fs presign "$R/main/g.csv")"  # the cherry-picked object
    [ "$(python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' "$URL")" = "$(cat "$WORK/b.csv")" ]
    lakectl auth users create --id "$REPO-user"
    expect "auth users list" "$REPO-user" "$(lakectl auth users list --amount 100)"
    lakectl auth groups members add --id Viewers --user "$REPO-user"
    expect "auth users groups list" "Viewers" "$(lakectl auth users groups list --id "$REPO-user")"
    lakectl auth users credentials create --id "$REPO-user" >/dev/null
    lakectl auth users policies list --id "$REPO-user" --effective >/dev/null
    lakectl auth users delete --id "$REPO-user"
fi

lakectl branch delete "$R/dev" -y
lakectl tag delete "$R/v1"
lakectl repo delete "$R-bare" -y
lakectl repo delete "$R" -y
echo "all lakeFS forms ran"
