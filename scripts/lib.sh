#!/usr/bin/env bash
# Sourced by the install scripts: a PyPI package at a pinned version in a
# venv of its own choosing, installed only when missing or at another
# version (so each script is idempotent and works offline once installed).
#
#   pinned_install VENV DIST VERSION EXECUTABLE [NOTE]
#     VENV        the venv folder (created with $PYTHON, default python3)
#     DIST        the PyPI distribution, e.g. aws-sam-cli
#     VERSION     the exact version
#     EXECUTABLE  a file under VENV/bin that must exist, e.g. sam
#     NOTE        appended to the "installing" line, e.g. "(about a minute)"
# Logs go to stderr, prefixed with the calling script's name.

pinned_install() {
    local venv="$1" dist="$2" version="$3" executable="$4" note="${5:-}"
    local me
    me="$(basename "$0")"
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "$me: creating $venv" >&2
        "${PYTHON:-python3}" -m venv "$venv"
    fi
    if "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$dist') != '$version')" 2>/dev/null \
        && [[ -x "$venv/bin/$executable" ]]; then
        echo "$me: $dist $version already installed in $venv" >&2
        return 0
    fi
    echo "$me: installing $dist==$version $note" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$dist==$version"
}
