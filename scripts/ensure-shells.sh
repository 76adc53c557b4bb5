#!/usr/bin/env bash
# Make sure zsh and fish are installed for the completion tests (tests/cli/test_completion.py),
# which drive each shell's own completion of `lakectl completion zsh|fish` as a user's Tab would.
# When one is missing, install the `zsh` and `fish` packages with apt-get (updating the package
# lists when the first try fails). Fast no-op when both are present. Without apt (or root) it
# only warns, and those shells' tests skip loudly.
set -uo pipefail

missing=()
for shell in zsh fish; do
    command -v "$shell" >/dev/null 2>&1 || missing+=("$shell")
done
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

give_up() {
    echo "ensure-shells: $1; the completion tests of ${missing[*]} will skip" >&2
    exit 0
}

command -v apt-get >/dev/null 2>&1 || give_up "no ${missing[*]} and apt-get is unavailable"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || give_up "no ${missing[*]} and not root (no sudo)"
    SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null 2>&1
    $SUDO apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || give_up "apt-get could not install ${missing[*]}"
}
for shell in "${missing[@]}"; do
    command -v "$shell" >/dev/null 2>&1 || give_up "the $shell package did not provide $shell"
done
echo "ensure-shells: installed ${missing[*]}" >&2
