"""Read auditing's cost, side by side (docs/decisions/0009-journal.md): GETs of a 4 KiB object
through the REST API of a real server process at ``--connections`` connections
(``bench_server_load.py``'s Python load generator), with reads audited and not.

One server, its journal on, is switched between the two modes (``POST /api/v1/journal/enable``
with ``{"reads": true}`` / ``{"reads": false}``, which the server follows at once) for
``--bursts`` alternating bursts of ``--seconds`` each: the two modes share the server process,
its warm caches and the machine's drifting load, so that the comparison is of the modes alone.
Not audited, a read looks at one cached flag; audited, every GET stores one ``read-object``
entry (group commit with the concurrent ones) before its bytes go out.
"""

from __future__ import annotations

import argparse
import sys

from _benchutil import Table, median, print_context, temp_dir
from _liveserver import LiveServer, live_server
from bench_server_load import REPO, Op, run_python

SIZE = 4096
PATH = "reads/object.bin"
MODES = ("reads not audited", "reads audited")


def prepare(server: LiveServer) -> None:
    with server.client() as api:
        r = api.post("/repositories", json={"name": REPO, "storage_namespace": f"local://{REPO}"})
        r.raise_for_status()
        r = api.post(
            f"/repositories/{REPO}/branches/main/objects", params={"path": PATH}, content=b"r" * SIZE
        )
        r.raise_for_status()
        api.post(f"/repositories/{REPO}/branches/main/commits", json={"message": "4 KiB"}).raise_for_status()
        api.get(f"/repositories/{REPO}/refs/main/objects", params={"path": PATH}).raise_for_status()


def switch(server: LiveServer, audited: bool) -> None:
    with server.client() as api:
        assert api.post("/journal/enable", json={"reads": audited}).json()["reads"] is audited


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="timed load per burst")
    parser.add_argument("--bursts", type=int, default=6, help="bursts per mode, alternating")
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    print_context("read auditing's cost: REST GETs of a 4 KiB object, reads audited and not")
    op = Op("read 4 KiB object", "GET", f"/api/v1/repositories/{REPO}/refs/main/objects?path={PATH}")
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    p50s: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    with temp_dir("lakectl-bench-journal-reads-") as work, live_server(work) as server:
        prepare(server)
        switch(server, False)
        run_python(server, op, 2.0, args.connections, work, "warm")
        for b in range(args.bursts):
            for audited, mode in enumerate(MODES):
                switch(server, bool(audited))
                result = run_python(server, op, args.seconds, args.connections, work, f"b{b}{audited}")
                if result.errors:
                    raise SystemExit(f"{result.errors} failed reads with {mode}")
                rates[mode].append(result.rps)
                p50s[mode].append(result.p50_ms)
                cpu[mode].append(result.server_cpu / result.requests * 1e6)
                print(
                    f"  burst {b + 1}, {mode}: {result.rps:,.0f} reads/s, p50 {result.p50_ms:.2f} ms, "
                    f"server CPU {cpu[mode][-1]:,.0f} us/read"
                )
        with server.client() as api:
            found = api.get("/journal", params={"amount": 3}).json()["results"]
        assert found and all(e["event_type"] == "read-object" for e in found), found
    # Server CPU per read is the steadier figure on a shared machine: throughput follows the
    # other processes' load, CPU time per request much less.
    base, base_cpu = median(rates[MODES[0]]), median(cpu[MODES[0]])
    table = Table("mode", "reads/s", "p50", "time vs not audited", "server CPU/read", "CPU vs not audited")
    for mode in MODES:
        table.add(
            mode,
            f"{median(rates[mode]):,.0f}",
            f"{median(p50s[mode]):.2f} ms",
            f"{base / median(rates[mode]):.3f}",
            f"{median(cpu[mode]):,.0f} us",
            f"{median(cpu[mode]) / base_cpu:.3f}",
        )
    title = f"GET of a 4 KiB object, {args.connections} connections (medians of {args.bursts} bursts)"
    table.print(title)
    sys.exit(0)


if __name__ == "__main__":
    main()
