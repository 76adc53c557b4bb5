#!/usr/bin/env bash
# Run every benchmark in sequence (`make bench` calls this with the venv on PATH).
#
#   bash benchmarks/run_all.sh           full size (about 15-25 minutes on 2 cores; the first
#                                        run also installs dvc and oxenai into
#                                        benchmarks/.peers-venv)
#   bash benchmarks/run_all.sh --quick   scaled down, a couple of minutes (targets not judged
#                                        where they only apply at full size)
#
# Each script prints its own table with targets and PASS/FAIL and exits 0; a script that
# crashes or overruns its time limit is reported here and the next one still runs.
# PYTHON overrides the interpreter (default: python on PATH).
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python}"
quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

if ! command -v "$py" >/dev/null 2>&1; then
    echo "no '$py' on PATH: run through 'make bench' or set PYTHON" >&2
    exit 1
fi

failed=()

bench() {
    local limit="$1"
    shift
    echo
    echo "=== $* (time limit ${limit}s) ==="
    local start=$SECONDS
    timeout --signal=INT --kill-after=30 "$limit" "$py" "$here/$@"
    local rc=$?
    echo "--- $1: exit $rc in $((SECONDS - start)) s"
    [[ $rc -ne 0 ]] && failed+=("$1 (exit $rc)")
    return 0
}

echo "benchmarks on $(nproc) CPU(s), load average: $(cut -d' ' -f1-3 /proc/loadavg); $("$py" --version)"

# The peers, before any timing: git from the system (make bench installs it), DVC and Oxen
# pip-installed into benchmarks/.peers-venv on the first run (_peers.py). One that cannot be
# installed is reported here and by the benchmarks, which skip its rows.
echo
echo "=== peers: git, dvc, oxen ==="
timeout --kill-after=30 1800 "$py" "$here/_peers.py" ||
    echo "peer installation did not finish cleanly (exit $?): each benchmark installs or skips its peers"

if [[ $quick -eq 1 ]]; then
    bench 600 bench_cost_follows_changes.py --small 10000 --large 100000 --reps 3
    bench 300 bench_commit_1m.py --entries 100000
    bench 900 bench_small_files.py --files 5000 --dirs 50
    bench 300 bench_cli_latency.py --runs 5 --commits 200
    bench 120 bench_actions.py --commits 10
    bench 300 bench_upload_1gib.py --size-mib 128 --runs 1
    bench 300 bench_big_file.py --size-mib 128 --runs 1
    bench 300 bench_server_load.py --seconds 3 --warmup 1 --single-seconds 1
    bench 300 bench_remote_upload.py --size-mib 256 --runs 1
    bench 600 bench_remote_vs_embedded.py --size-mib 128 --files 5000 --runs 1
    bench 300 bench_gateway.py --size-mib 256 --runs 1 --seconds 3
    bench 300 bench_gc.py --blocks 50000
    bench 300 bench_gc_expired.py --objects 10000 --commits 50
    bench 300 bench_fsck.py --size-mib 256 --small-files 10000 --runs 1
    bench 300 bench_spark_read.py --rows 200000 --runs 2
    bench 300 bench_change_feed.py --objects 20000 --runs 2
    bench 300 bench_streaming_sink.py --batches 10
    bench 300 bench_journal.py --files 5000 --seconds 3 --rounds 1
    bench 300 bench_journal_rebuild.py --writes 100000 --commits 100
    bench 300 bench_journal_reads.py --seconds 2 --bursts 2
    bench 300 bench_local.py --files 5000
    bench 300 bench_import.py --objects 20000 --s3-objects 2000
    bench 300 bench_ui.py --entries 100000 --commits 60 --parquet-mib 256 --requests 10
    bench 300 bench_table_diff.py --rows 1000000 --runs 1
    bench 300 bench_table_diff_engines.py --rows 1000000 --runs 1
    bench 300 bench_rows_merge.py --rows 1000000 --runs 1
    bench 300 bench_delta_merge.py --versions 2000 --small 200 --runs 2
    bench 300 bench_delta_diff.py --rows 1000000 --runs 1
else
    bench 1800 bench_cost_follows_changes.py
    bench 900 bench_commit_1m.py --runs 3
    bench 3600 bench_small_files.py
    bench 600 bench_cli_latency.py
    bench 300 bench_actions.py
    bench 900 bench_upload_1gib.py
    bench 900 bench_big_file.py
    bench 600 bench_server_load.py
    bench 900 bench_remote_upload.py
    bench 1800 bench_remote_vs_embedded.py
    bench 900 bench_gateway.py
    bench 1200 bench_gc.py
    bench 600 bench_gc_expired.py
    bench 600 bench_fsck.py
    bench 900 bench_spark_read.py
    bench 600 bench_change_feed.py
    bench 600 bench_streaming_sink.py
    bench 1200 bench_journal.py
    bench 600 bench_journal_rebuild.py
    bench 600 bench_journal_reads.py
    bench 1800 bench_local.py
    bench 1800 bench_import.py
    bench 900 bench_ui.py
    bench 600 bench_table_diff.py
    bench 900 bench_table_diff_engines.py
    bench 900 bench_rows_merge.py
    bench 900 bench_delta_merge.py
    bench 900 bench_delta_diff.py
fi

echo
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "scripts that did not finish cleanly: ${failed[*]}"
else
    echo "all benchmark scripts ran (see each table for PASS/FAIL against its target)"
fi
exit 0
