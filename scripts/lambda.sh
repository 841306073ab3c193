#!/usr/bin/env bash
# cargo-lambda (PyPI, pinned; it brings zig through `ziglang`) in .tools/lambda.
#
#   scripts/lambda.sh install   create .tools/lambda and install cargo-lambda
#   scripts/lambda.sh build     cargo lambda build --profile lambda --x86-64 of the five
#                               functions; prints each bootstrap's size
#   scripts/lambda.sh smoke     run Persist under `cargo lambda watch` against the
#                               AWS emulator (AWS_ENDPOINT_URL must point at moto),
#                               invoke it with events/persist-batch.sqs.json and
#                               check the partial batch response
#
# x86_64 because the aarch64 Rust target may not be installable offline; for
# arm64 deployments add the target (`rustup target add aarch64-unknown-linux-gnu`)
# and build with --arm64.
set -euo pipefail

CARGO_LAMBDA_VERSION="1.9.2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.tools/lambda"
FUNCTIONS=(orchestrator request persist athena notify)
# The smoke test's bounds: attempts x (timeout + 2 s) is its longest wait.
SMOKE_ATTEMPTS=20
INVOKE_TIMEOUT_S=60
export PATH="$VENV/bin:$PATH"

log() { echo "lambda.sh: $*" >&2; }

install() {
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    if [[ "$("$VENV/bin/cargo-lambda" lambda --version 2>/dev/null)" == "cargo-lambda $CARGO_LAMBDA_VERSION"* ]]; then
        log "cargo-lambda $CARGO_LAMBDA_VERSION already installed"
        return 0
    fi
    log "installing cargo-lambda==$CARGO_LAMBDA_VERSION (with ziglang)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "cargo-lambda==$CARGO_LAMBDA_VERSION"
}

build() {
    local packages=()
    for f in "${FUNCTIONS[@]}"; do packages+=(-p "$f"); done
    # The workspace's `lambda` profile: release with fat LTO and one codegen unit.
    cargo lambda build --profile lambda --x86-64 "${packages[@]}"
    for f in "${FUNCTIONS[@]}"; do
        local bootstrap="$ROOT/target/lambda/$f/bootstrap"
        [[ -f "$bootstrap" ]] || { log "missing $bootstrap"; exit 1; }
        printf '%-13s %s bytes\n' "$f" "$(stat -c %s "$bootstrap")"
    done
}

smoke() {
    : "${AWS_ENDPOINT_URL:?AWS_ENDPOINT_URL must point at moto: eval \"\$(scripts/moto.sh start)\"}"
    local python="$ROOT/.venv/bin/python" bucket="tributary-smoke" port log_dir
    "$python" - "$bucket" <<'PY'
import sys, boto3
s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
try:
    s3.create_bucket(Bucket=sys.argv[1])
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
PY
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
    log_dir="$(mktemp -d)"   # outside the crate: watch would rebuild on its own log
    # Build first, in the open: watch then starts the ready binary, and a build
    # error shows here instead of as an invoke that never answers.
    cargo build -p persist
    # In a session of its own, so that the cleanup below stops watch, the cargo
    # it runs and the function, together.
    setsid cargo lambda watch -A 127.0.0.1 -P "$port" \
        --env-var "LAKE_BUCKET=$bucket,TRIBUTARY_S3_FORCE_PATH_STYLE=true,AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL" \
        --env-var "AWS_REGION=us-east-1,AWS_ACCESS_KEY_ID=testing,AWS_SECRET_ACCESS_KEY=testing" \
        >"$log_dir/watch.log" 2>&1 &
    WATCH_PID=$!
    # Stop watch and the function it started on any way out, a signal too.
    trap 'kill -- -$WATCH_PID 2>/dev/null || true' EXIT
    trap 'exit 143' TERM INT
    local response="" attempt
    # `cargo lambda invoke` has no timeout of its own: an invoke the emulator
    # accepted but no function picked up would wait forever (a CI run once hung
    # here until its 90 minutes ran out). Each attempt gets INVOKE_TIMEOUT_S.
    local rc
    for attempt in $(seq 1 "$SMOKE_ATTEMPTS"); do
        response="$(timeout --kill-after=5 "$INVOKE_TIMEOUT_S" cargo lambda invoke persist -A 127.0.0.1 -P "$port" -o json \
            --data-file "$ROOT/events/persist-batch.sqs.json" 2>"$log_dir/invoke.err")" && break
        rc=$?
        (( rc == 124 || rc == 137 )) && log "attempt $attempt: no answer within ${INVOKE_TIMEOUT_S} s"
        response=""
        sleep 2
    done
    if [[ -z "$response" ]]; then
        log "no response from persist under cargo lambda watch after $SMOKE_ATTEMPTS attempts; last lines:"
        tail -n 30 "$log_dir/watch.log" "$log_dir/invoke.err" >&2
        exit 1
    fi
    echo "$response"
    # The fixture holds two good PersistMessages and one with version 2: the
    # answer must name that one record alone.
    "$python" - "$response" <<'PY'
import json, sys
failures = json.loads(sys.argv[1])["batchItemFailures"]
ids = [f["itemIdentifier"] for f in failures]
assert len(ids) == 1, f"expected exactly one failed record, got {ids}"
print(f"lambda.sh: smoke test passed: partial batch response names {ids[0]} alone", file=sys.stderr)
PY
}

case "${1:-}" in
install) install ;;
build) build ;;
smoke) smoke ;;
*)
    echo "usage: $0 install|build|smoke" >&2
    exit 2
    ;;
esac
