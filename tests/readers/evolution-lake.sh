#!/usr/bin/env bash
# Builds the messy three-run dataset `evolution` of fixtures/evolution/ with
# the CLI: run N serves runN.json (a JSON array) from `python3 -m
# http.server` on loopback to a `strategy: simple` pipeline scheduled on
# 2026-11-0N, so each run lands in its own dt= partition.
#
#   tests/readers/evolution-lake.sh LAKE_DIR [TRIBUTARY_BINARY]
set -euo pipefail

LAKE="${1:?usage: $0 LAKE_DIR [TRIBUTARY_BINARY]}"
BIN="${2:-target/debug/tributary}"
FIXTURES="$(cd "$(dirname "${BASH_SOURCE[0]}")/fixtures/evolution" && pwd)"
SERVED="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$SERVED" >/dev/null 2>&1 &
SERVER=$!
trap 'kill "$SERVER"; rm -rf "$SERVED"' EXIT

cat >"$SERVED/spec.yaml" <<SPEC
version: 1
pipeline: evolution
strategy: { kind: simple }
request:
  url: http://127.0.0.1:$PORT/records.json
  allow: { loopback: true }
target:
  dataset: evolution
SPEC
"$BIN" validate "$SERVED/spec.yaml" >/dev/null
sleep 0.5
for run in 1 2 3; do
    cp "$FIXTURES/run$run.json" "$SERVED/records.json"
    "$BIN" run "$SERVED/spec.yaml" --lake "$LAKE" --scheduled-at "2026-11-0${run}T06:00:00Z"
done
