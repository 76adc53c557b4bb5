"""The screenshots of docs/ui.md: a small demo lake served as `lakectl server run` serves it, each
page of the web UI shot by headless Chromium (Debian's, /usr/bin/chromium; see
scripts/ensure-chromium.sh) at 1200x800 into docs/ui/<page>.png.

    .venv/bin/python scripts/ui-screenshots.py [--out docs/ui]
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import struct
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import uvicorn

from lakectl.core import porcelain as p
from lakectl.core import protection, writes
from lakectl.core.lake import Lake
from lakectl.core.upkeep import retention
from lakectl.core.workflow import actionruns, pulls
from lakectl.errors import HookFailed
from server.app import create_app
from server.auth.users import Role
from server.config import load_settings
from server.ui import links

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
REPO = "sales"


def demo(lake: Lake) -> str:
    """A repository with history, a tag, a branch with uncommitted changes; the id of one commit."""
    p.create_repo(lake, REPO, "main", f"local://{REPO}")
    for month in ("01", "02", "03"):
        rows = "".join(f"2026-{month}-{d:02d},store-{d % 4},{d * 13.5:.2f}\n" for d in range(1, 29))
        writes.upload(
            lake,
            REPO,
            "main",
            f"orders/2026-{month}.csv",
            ("date,store,amount\n" + rows).encode(),
            "text/csv",
        )
        p.commit(lake, REPO, "main", f"Orders of 2026-{month}", {"source": "pos-export"}, "ada")
    writes.upload(
        lake,
        REPO,
        "main",
        "README.md",
        b"# Sales\n\nMonthly order exports, one CSV a month.\n",
        "text/markdown",
    )
    writes.upload(
        lake, REPO, "main", "stores.json", b'{"store-0": "Lyon", "store-1": "Porto"}\n', "application/json"
    )
    declaration = b"tables:\n  orders:\n    key: [date]\n"  # pull requests summarize the orders by it
    writes.upload(lake, REPO, "main", "_lakectl/tables.yaml", declaration, "application/yaml")
    head = p.commit(lake, REPO, "main", "Describe the data set", {"ticket": "DATA-42"}, "grace")
    previewed(lake)
    p.create_tag(lake, REPO, "v2026.q1", "main")
    p.create_branch(lake, REPO, "cleanup", "main")
    writes.upload(
        lake,
        REPO,
        "cleanup",
        "orders/2026-03.csv",
        b"date,store,amount\n2026-03-01,store-1,13.50\n",
        "text/csv",
    )
    writes.delete_objects(lake, REPO, "cleanup", ["stores.json"])
    writes.upload(lake, REPO, "cleanup", "orders/2026-04.csv", b"date,store,amount\n", "text/csv")
    p.create_branch(lake, REPO, "experiment", "main")
    p.create_branch(lake, REPO, "fix-march", "main")
    writes.upload(
        lake,
        REPO,
        "fix-march",
        "orders/2026-03.csv",
        b"date,store,amount\n2026-03-01,store-1,13.50\n2026-03-02,store-2,27.00\n",
        "text/csv",
    )
    writes.upload(lake, REPO, "fix-march", ACTION_FILE, json.dumps(ACTION).encode(), "application/yaml")
    p.commit(lake, REPO, "fix-march", "orders: re-export March without the test rows", {}, "ada")
    protection.add_rule(lake, REPO, protection.Rule("main", required_approvals=1))
    retention.set_rules(lake, REPO, retention.GCRules(21, (retention.BranchRetention("main", 90),)))
    pulls.create_pull(
        lake,
        REPO,
        "Re-export March without the test rows",
        "fix-march",
        "main",
        "The March export held **test rows** from store-9.\n\n- re-exported from the POS\n- totals checked",
        "ada",
    )
    pulls.add_comment(lake, REPO, "1", "Totals match the *finance* report for March.", "grace")
    p.create_branch(lake, REPO, "q2-stores", "main")
    pulls.create_pull(lake, REPO, "Add the Q2 stores", "q2-stores", "main", "", "grace")
    refused_run(lake)
    p.create_repo(lake, "marketing", "main", "local://marketing")
    return head.id


ACTION_FILE = "_lakefs_actions/orders-quality.yaml"
CHECK = """import json, sys
event = json.load(sys.stdin)
branch = event["branch_id"]
print(f"{event['hook_id']} on {branch}:")
if event["hook_id"] == "row_counts" and branch == "q2-stores":
    print("orders/2026-04.csv: 1 row, expected at least 28 (one a day)")
    sys.exit(1)
print("orders/*.csv: columns date, store, amount; 28 rows a month: ok")
"""
ACTION = {
    "name": "Orders quality",
    "on": {"pre-commit": {"branches": ["fix-march", "q2-stores"]}},
    "hooks": [
        {"id": hook, "type": "command", "properties": {"command": [sys.executable, "-c", CHECK]}}
        for hook in ("schema", "row_counts")
    ],
}
"""A pre-commit action of two command hooks, for the Actions pages: on q2-stores, the second fails."""


def refused_run(lake: Lake) -> None:
    """A commit on q2-stores that the action refuses: a failed run."""
    writes.upload(lake, REPO, "q2-stores", ACTION_FILE, json.dumps(ACTION).encode(), "application/yaml")
    writes.upload(
        lake, REPO, "q2-stores", "orders/2026-04.csv", b"date,store,amount\n2026-04-01,store-4,9.00\n"
    )
    try:
        p.commit(lake, REPO, "q2-stores", "orders: April, first day", {}, "grace")
    except HookFailed:
        return
    raise AssertionError("the action did not refuse the commit")


def previewed(lake: Lake) -> None:
    """Uncommitted on main: a Parquet summary of the orders and a chart of it, for the previews."""
    days = [f"2026-{m:02d}-{d:02d}" for m in (1, 2, 3) for d in range(1, 29)]
    table = pa.table(
        {
            "date": pa.array(days).cast(pa.date32()),
            "store": [f"store-{i % 4}" for i in range(len(days))],
            "amount": [round((i % 28 + 1) * 13.5, 2) for i in range(len(days))],
            "note": [None if i % 5 else "promotion" for i in range(len(days))],
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=28)
    parquet = "application/vnd.apache.parquet"
    writes.upload(lake, REPO, "main", "reports/orders-q1.parquet", out.getvalue(), parquet)
    writes.upload(lake, REPO, "main", "reports/orders-by-month.png", _bars([392, 414, 405]), "image/png")


def _bars(values: list[int], width: int = 360, height: int = 180) -> bytes:
    """A bar chart as a PNG (drawn here: no imaging library needed)."""
    top = max(values)
    rows = []
    for y in range(height):
        row = bytearray(b"\xff\xff\xff" * width)
        for i, value in enumerate(values):
            if height - y <= value * (height - 20) // top:
                for x in range(40 + i * 110, 40 + i * 110 + 70):
                    row[3 * x : 3 * x + 3] = b"\x0b\x5c\xad"
        rows.append(b"\0" + bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"".join(rows), 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "ui"))
    parser.add_argument("--only", nargs="*", help="shoot only these pages (e.g. object parquet)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as data_dir:
        # Command hooks run on this server (the demo's action checks the orders with Python).
        settings = load_settings(None, data_dir, environ={"LAKECTL_SERVER_ACTIONS_COMMAND_ENABLED": "true"})
        app = create_app(settings)
        auth = app.state.auth
        auth.setup("admin")
        commit_id = demo(app.state.lake)
        failed_run = actionruns.list_runs(app.state.lake, REPO, "q2-stores")[0].run_id
        for user, role in (("ada", Role.DEVELOPER), ("grace", Role.ANALYST)):  # the admin page's
            auth.create_user(user, role)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        base = f"http://127.0.0.1:{port}"
        shots = {
            "login": "/ui/login",
            "repositories": "/ui/",
            "repository": f"/ui/repos/{REPO}",
            "objects": f"/ui/repos/{REPO}/refs/main/objects?prefix=orders%2F",
            "object": f"/ui/repos/{REPO}/refs/main/object?path=orders%2F2026-01.csv&presign=1",
            "parquet": f"/ui/repos/{REPO}/refs/main/object?path=reports%2Forders-q1.parquet",
            "branches": f"/ui/repos/{REPO}/branches",
            "commits": f"/ui/repos/{REPO}/refs/main/log",
            "commit": f"/ui/repos/{REPO}/commits/{commit_id}",
            "changes": f"/ui/repos/{REPO}/branches/cleanup/changes",
            "compare": f"/ui/repos/{REPO}/compare?left=main&right=cleanup%24&two_way=1",
            "pulls": f"/ui/repos/{REPO}/pulls",
            "pull": f"/ui/repos/{REPO}/pulls/1",
            "actions": f"/ui/repos/{REPO}/actions",
            "action-run": f"/ui/repos/{REPO}/actions/{failed_run}",
            "settings": f"/ui/repos/{REPO}/settings",
            "delete": f"/ui/repos/{REPO}/settings#danger",
            "feed": "/ui/feed",
            "admin": "/ui/admin/users",
        }
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                context = browser.new_context(viewport={"width": 1200, "height": 800})
                page = context.new_page()
                login = shots.pop("login")
                if args.only is None or "login" in args.only:
                    page.goto(base + login)
                    page.screenshot(path=str(out / "login.png"))
                page.goto(f"{base}/ui/login?token={links.issue(auth, auth.get_user('admin'))}")
                for name, path in shots.items():
                    if args.only is not None and name not in args.only:
                        continue
                    page.goto(base + path)
                    if name == "parquet":  # the preview, below the object's facts
                        page.get_by_role("heading", name="Preview").evaluate("h => h.scrollIntoView()")
                    page.screenshot(path=str(out / f"{name}.png"))
                browser.close()
        finally:
            server.should_exit = True
            thread.join(timeout=10)
    for png in sorted(out.glob("*.png")):
        print(f"{png.relative_to(ROOT)}: {png.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
