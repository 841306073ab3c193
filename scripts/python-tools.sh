#!/usr/bin/env bash
# Python tools the tests and the benchmark use besides moto, pinned, in the
# repo's .venv:
#   pyarrow  reads back the Parquet that Persist writes (an independent reader)
#            and is the benchmark's Python peer;
#   duckdb   a second independent reader (tests/tests/persist_readback.rs).
#
#   scripts/python-tools.sh install
set -euo pipefail

PYARROW_VERSION="26.0.1"
DUCKDB_VERSION="2.0.1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

# ensure MODULE VERSION: installs MODULE==VERSION unless that version is there.
ensure() {
    local module="$1" version="$2"
    if "$VENV/bin/python" -c "import $module, sys; sys.exit($module.__version__ != '$version')" 2>/dev/null; then
        echo "python-tools.sh: $module $version already installed" >&2
    else
        echo "python-tools.sh: installing $module==$version" >&2
        "$VENV/bin/pip" install --quiet --disable-pip-version-check "$module==$version"
    fi
}

case "${1:-}" in
install)
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    ensure pyarrow "$PYARROW_VERSION"
    ensure duckdb "$DUCKDB_VERSION"
    ;;
*)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
