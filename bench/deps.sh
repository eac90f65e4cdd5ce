#!/bin/sh
# What `make bench` needs besides the Python packages of the `bench` extra:
#  - redis-server, iperf3 and zookeeper (P3, L2, F1) from apt, only when missing and we
#    are root (as system-deps does for kcat); without them their rows read "not available";
#  - nafka in its own virtualenv bench/.venv-nafka: nafka 0.1 needs Python >= 3.12
#    (sqlite3.connect(autocommit=True)) and kafka-python < 3, which conflicts with the
#    test extra's kafka-python 3. Built when a python3.12+ is found (PATH or pyenv).
set -u
missing=""
for tool in redis-server iperf3; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
# ZooKeeper (and a Java runtime) for the cluster scenarios P3, L2, F1
[ -f /usr/share/java/zookeeper.jar ] || missing="$missing zookeeper"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing$missing from apt"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing) \
            >/dev/null 2>&1 || echo "warning: could not install$missing; their rows will read 'not available'"
    else
        echo "warning:$missing missing and not root; their rows will read 'not available'"
    fi
fi

venv="$(dirname "$0")/.venv-nafka"
if [ ! -x "$venv/bin/python" ]; then
    python=""
    for candidate in python3 python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            python="$candidate"
            break
        fi
    done
    if [ -z "$python" ]; then
        echo "warning: no Python >= 3.12 found; nafka rows will read 'not available'"
    else
        echo "building $venv with $python for nafka"
        "$python" -m venv "$venv" && "$venv/bin/pip" install -q nafka \
            || { echo "warning: could not install nafka; its rows will read 'not available'"; rm -rf "$venv"; }
    fi
fi
exit 0
