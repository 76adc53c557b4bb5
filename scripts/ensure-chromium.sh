#!/usr/bin/env bash
# Make sure Debian's Chromium is at /usr/bin/chromium for the web UI's browser tests (tests/ui),
# which Playwright drives there: Playwright's own browser builds (`playwright install`) are
# never downloaded. When missing, install the `chromium` package with apt-get (updating the
# package lists when the first try fails). Fast no-op when present. Without apt (or root) it
# only warns, and the browser tests skip loudly.
set -uo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    exit 0
fi

give_up() {
    echo "ensure-chromium: $1; the browser tests (tests/ui) will skip" >&2
    exit 0
}

command -v apt-get >/dev/null 2>&1 || give_up "no $CHROMIUM and apt-get is unavailable"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || give_up "no $CHROMIUM and not root (no sudo)"
    SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null 2>&1
    $SUDO apt-get install -y -q chromium >/dev/null 2>&1 || give_up "apt-get could not install chromium"
}
[ -x "$CHROMIUM" ] || give_up "the chromium package did not provide $CHROMIUM"
echo "ensure-chromium: installed $("$CHROMIUM" --version 2>/dev/null | head -1)" >&2
