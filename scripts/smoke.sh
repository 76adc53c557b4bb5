#!/usr/bin/env bash
# The install users run, proved: a fresh virtualenv with `pip install .` (no extras, no test
# packages), then what the README shows with it: the embedded demo, `server setup`, `server run`,
# a remote upload/commit/diff/merge through the CLI, and an S3 put/get through the gateway. A
# runtime import that pyproject.toml does not declare fails here, as it would for a user.
#
# Runs outside the source tree (the installed package, never the checkout, is imported).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:-python3}"
VENV="${SMOKE_VENV:-$ROOT/.venv-smoke}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/lakectl-smoke.XXXXXX")"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf 'smoke: %s\n' "$*"; }
fail() { printf 'smoke: FAILED: %s\n' "$*" >&2; [ -f "$WORK/server.log" ] && tail -n 40 "$WORK/server.log" >&2; exit 1; }

step "a fresh virtualenv with pip install . (no extras) in $VENV"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "$ROOT"
export PATH="$VENV/bin:$PATH"
cd "$WORK"
[ "$(command -v lakectl)" = "$VENV/bin/lakectl" ] || fail "lakectl is not the smoke venv's"
python -c 'import lakectl, sys; sys.exit(0 if "site-packages" in lakectl.__file__ else 1)' \
    || fail "lakectl is imported from the checkout, not the install"
if python -c 'import pytest' 2>/dev/null; then fail "the plain install brought test packages in"; fi

step "examples/demo.sh on the embedded default"
bash "$ROOT/examples/demo.sh" >"$WORK/demo.log" 2>&1 || { tail -n 40 "$WORK/demo.log" >&2; fail "examples/demo.sh"; }

step "lakectl server setup"
export LAKECTL_SERVER_DATA_DIR="$WORK/server"
read -r API_PORT S3_PORT < <(python - <<'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
export LAKECTL_SERVER_LISTEN_ADDRESS="127.0.0.1:$API_PORT"
export LAKECTL_SERVER_GATEWAYS_S3_LISTEN_ADDRESS="127.0.0.1:$S3_PORT"
lakectl server setup --json >"$WORK/setup.json" || fail "lakectl server setup"
KEY_ID="$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["access_key_id"])' "$WORK/setup.json")"
SECRET="$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret_access_key"])' "$WORK/setup.json")"

step "lakectl server run on 127.0.0.1:$API_PORT (S3 on $S3_PORT)"
lakectl server run >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
    if python -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:$API_PORT/api/v1/healthcheck').status_code != 204)" 2>/dev/null; then
        break
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || fail "the server exited"
    sleep 0.2
done

step "remote upload, commit, branch, diff, merge through the CLI"
export LAKECTL_SERVER_ENDPOINT_URL="http://127.0.0.1:$API_PORT"
export LAKECTL_CREDENTIALS_ACCESS_KEY_ID="$KEY_ID" LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY="$SECRET"
export LAKECTL_HOME="$WORK/unused-home" LAKECTL_COMMITTER=smoke
printf 'id,v\n1,a\n' >"$WORK/a.csv"
printf 'id,v\n1,b\n' >"$WORK/b.csv"
lakectl doctor >/dev/null || fail "doctor against the server"
lakectl repo create lakefs://smoke >/dev/null
lakectl fs upload --source "$WORK/a.csv" lakefs://smoke/main/t/a.csv >/dev/null
lakectl commit lakefs://smoke/main -m one >/dev/null
lakectl branch create lakefs://smoke/dev --source lakefs://smoke/main >/dev/null
lakectl fs upload --source "$WORK/b.csv" lakefs://smoke/dev/t/a.csv >/dev/null
lakectl commit lakefs://smoke/dev -m two >/dev/null
lakectl diff lakefs://smoke/main lakefs://smoke/dev --json | python -c '
import json, sys
changes = json.load(sys.stdin)
assert [(c["path"], c["type"]) for c in changes] == [("t/a.csv", "changed")], changes
' || fail "remote diff"
lakectl merge lakefs://smoke/dev lakefs://smoke/main >/dev/null || fail "remote merge"
[ "$(lakectl fs cat lakefs://smoke/main/t/a.csv)" = "$(cat "$WORK/b.csv")" ] || fail "merged content"

step "the web UI: sign in with the access key, then a pull request's page"
lakectl pr create lakefs://smoke/dev lakefs://smoke/main --title "smoke pull request" >/dev/null || fail "pr create"
python - "$API_PORT" "$KEY_ID" "$SECRET" <<'EOF' || fail "web UI"
import re, sys
import httpx
port, key, secret = sys.argv[1:]
with httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=True) as ui:
    form = ui.get("/ui/login")
    assert form.status_code == 200 and "text/html" in form.headers["content-type"], form
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    home = ui.post("/ui/login", data={"access_key_id": key, "secret_access_key": secret, "csrf": csrf})
    assert home.status_code == 200 and "smoke" in home.text, home.text[:300]
    pull = ui.get("/ui/repos/smoke/pulls/1")
    assert pull.status_code == 200 and "smoke pull request" in pull.text, pull.text[:300]
    assert ui.get("/ui/static/ui.css").status_code == 200
EOF

step "S3 put and get through the gateway (boto3)"
python - "$S3_PORT" "$KEY_ID" "$SECRET" <<'EOF' || fail "S3 gateway"
import sys
import boto3
port, key, secret = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id=key,
                  aws_secret_access_key=secret, region_name="us-east-1")
s3.put_object(Bucket="smoke", Key="main/s3/put.txt", Body=b"through the gateway\n")
assert s3.get_object(Bucket="smoke", Key="main/s3/put.txt")["Body"].read() == b"through the gateway\n"
assert s3.get_object(Bucket="smoke", Key="main/t/a.csv")["Body"].read() == b"id,v\n1,b\n"
EOF

step "an optional part without its extra: one line naming it"
out="$(lakectl gc run lakefs://smoke --spark 'local[1]' 2>&1 >/dev/null)" && fail "gc --spark without pyspark succeeded"
printf '%s\n' "$out" | grep -q "Traceback" && fail "gc --spark without pyspark: a traceback: $out"
printf '%s\n' "$out" | grep -q "\[spark\]" || fail "gc --spark without pyspark does not name the extra: $out"

out="$(python "$ROOT/examples/pipeline.py" 2>&1)" && fail "examples/pipeline.py without pyspark succeeded"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && printf '%s\n' "$out" | grep -q "^error: .*pyspark" \
    || fail "examples/pipeline.py without pyspark: not one line naming pyspark: $out"

step "ok"
