#!/usr/bin/env bash
# Make sure the PostgreSQL server binaries (initdb, pg_ctl, postgres) are on this machine, for the
# tests that start a throwaway server (tests/pg.py looks in the same places). When they are
# missing, install Debian/Ubuntu's `postgresql` package with apt-get. Fast no-op when present.
# Without apt (or root) it only warns, and the tests skip; under CI (CI set) it fails instead,
# as the tests would.
set -uo pipefail

have_postgres() {
    local d
    for d in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")" \
        /usr/lib/postgresql/*/bin /usr/local/bin /usr/local/pgsql/bin; do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
            return 0
        fi
    done
    return 1
}

have_postgres && exit 0

give_up() {
    echo "ensure-postgres: $1; the PostgreSQL tests will skip (or fail under CI)" >&2
    if [ -n "${CI:-}" ]; then exit 1; fi
    exit 0
}

command -v apt-get >/dev/null 2>&1 || give_up "PostgreSQL is not installed and apt-get is unavailable"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        give_up "PostgreSQL is not installed and installing it needs root"
    fi
fi

echo "ensure-postgres: installing PostgreSQL with apt-get" >&2
APT="$SUDO env DEBIAN_FRONTEND=noninteractive apt-get -qq -o Dpkg::Use-Pty=0"
$APT update && $APT install -y --no-install-recommends postgresql >/dev/null ||
    give_up "apt-get install postgresql failed"
have_postgres || give_up "installed postgresql, yet initdb/pg_ctl/postgres are still missing"
echo "ensure-postgres: installed $("$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/postgres" --version)" >&2
