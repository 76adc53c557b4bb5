#!/usr/bin/env bash
# Make sure a Java runtime (17 or newer) is on PATH for the Spark tests and benchmarks: PySpark
# starts the JVM with the `java` it finds. When missing, install Debian/Ubuntu's headless OpenJDK
# with apt-get. Fast no-op when present. Without apt (or root) it only warns, and the Spark tests
# skip loudly.
set -uo pipefail

java_major() {
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1
}

if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
    exit 0
fi

give_up() {
    echo "ensure-java: $1; the Spark tests will skip" >&2
    exit 0
}

command -v apt-get >/dev/null 2>&1 || give_up "no Java 17+ and apt-get is unavailable"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || give_up "no Java 17+ and not root (no sudo)"
    SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null 2>&1
    $SUDO apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1 || give_up "apt-get could not install openjdk-17-jre-headless"
}
echo "ensure-java: installed $(java -version 2>&1 | head -1)" >&2
