#!/usr/bin/env bash
# Python tools the tests use besides moto, pinned, in the repo's .venv:
# pyarrow reads back the Parquet that Persist writes (an independent reader).
#
#   scripts/python-tools.sh install
set -euo pipefail

PYARROW_VERSION="26.0.1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

case "${1:-}" in
install)
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    if "$VENV/bin/python" -c "import pyarrow, sys; sys.exit(pyarrow.__version__ != '$PYARROW_VERSION')" 2>/dev/null; then
        echo "python-tools.sh: pyarrow $PYARROW_VERSION already installed" >&2
    else
        echo "python-tools.sh: installing pyarrow==$PYARROW_VERSION" >&2
        "$VENV/bin/pip" install --quiet --disable-pip-version-check "pyarrow==$PYARROW_VERSION"
    fi
    ;;
*)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
