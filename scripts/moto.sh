#!/usr/bin/env bash
# Local AWS emulator (moto in server mode) for the AWS adapter tests.
#
#   scripts/moto.sh install   create .venv (repo root) and install the pinned moto[server]
#   scripts/moto.sh start     start moto_server on 127.0.0.1:<free port> in the background;
#                             prints `export AWS_ENDPOINT_URL=...` (use with eval)
#   scripts/moto.sh stop      stop the server started by `start`
#   scripts/moto.sh status    print the endpoint if the server is up (exit 1 if not)
#
# Typical use:  scripts/moto.sh install && eval "$(scripts/moto.sh start)"
# State lives in .moto/ (port, pid, server.log); both .venv and .moto are git-ignored.
set -euo pipefail

MOTO_VERSION="5.2.5"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENV="$ROOT/.venv"
STATE="$ROOT/.moto"
PYTHON="${PYTHON:-python3}"

# Exit 0 when http://127.0.0.1:$1/moto-api/ answers.
answers() {
    "$PYTHON" - "$1" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/moto-api/", timeout=1).read()
except Exception:
    sys.exit(1)
PY
}

running_port() {
    [[ -f "$STATE/pid" && -f "$STATE/port" ]] || return 1
    local pid port
    pid="$(cat "$STATE/pid")"
    port="$(cat "$STATE/port")"
    kill -0 "$pid" 2>/dev/null || return 1
    answers "$port" || return 1
    echo "$port"
}

install() { pinned_install "$VENV" "moto[server]" "$MOTO_VERSION" moto_server "(about 80 s)"; }

start() {
    local port
    if port="$(running_port)"; then
        log "already running on port $port (pid $(cat "$STATE/pid"))"
        echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$port"
        return 0
    fi
    if [[ ! -x "$VENV/bin/moto_server" ]]; then
        log "$VENV/bin/moto_server not found: run scripts/moto.sh install first"
        return 1
    fi
    mkdir -p "$STATE"
    port="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
    nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$port" >"$STATE/server.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$STATE/pid"
    echo "$port" >"$STATE/port"
    local waited=0
    until answers "$port"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "moto_server exited; see $STATE/server.log:"
            tail -n 20 "$STATE/server.log" >&2 || true
            rm -f "$STATE/pid" "$STATE/port"
            return 1
        fi
        if ((waited >= 60)); then
            log "moto_server did not answer on port $port within 30 s"
            kill "$pid" 2>/dev/null || true
            rm -f "$STATE/pid" "$STATE/port"
            return 1
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
    log "moto $MOTO_VERSION listening on 127.0.0.1:$port (pid $pid)"
    echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$port"
}

stop() {
    if [[ ! -f "$STATE/pid" ]]; then
        log "not running (no $STATE/pid)"
        return 0
    fi
    local pid
    pid="$(cat "$STATE/pid")"
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 20); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.25
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
        log "stopped pid $pid"
    else
        log "pid $pid was not running"
    fi
    rm -f "$STATE/pid" "$STATE/port"
}

status() {
    local port
    if port="$(running_port)"; then
        echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$port"
    else
        log "not running"
        return 1
    fi
}

case "${1:-}" in
install) install ;;
start) start ;;
stop) stop ;;
status) status ;;
*)
    echo "usage: $0 install|start|stop|status" >&2
    exit 2
    ;;
esac
