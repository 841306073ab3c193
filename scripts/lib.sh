#!/usr/bin/env bash
# Sourced by the scripts that install a pinned tool (cfn-lint.sh,
# sam-validate.sh, moto.sh): the repository root, a log line, and a PyPI package at a
# pinned version in a venv of its own choosing, installed only when missing
# or at another version (so each script is idempotent and works offline once
# installed).
#
#   ROOT        the repository root (the folder above scripts/)
#   log MESSAGE...
#               "<calling script's name>: MESSAGE" on stderr
#   pinned_install VENV DIST VERSION EXECUTABLE [NOTE]
#     VENV        the venv folder (created with $PYTHON, default python3)
#     DIST        the PyPI distribution, e.g. aws-sam-cli, with any extras,
#                 e.g. moto[server] (the version check reads the name alone)
#     VERSION     the exact version
#     EXECUTABLE  a file under VENV/bin that must exist, e.g. sam
#     NOTE        appended to the "installing" line, e.g. "(about a minute)"
# Logs go to stderr, prefixed with the calling script's name.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { echo "$(basename "$0"): $*" >&2; }

pinned_install() {
    local venv="$1" dist="$2" version="$3" executable="$4" note="${5:-}"
    local name="${dist%%\[*}"
    if [[ ! -x "$venv/bin/python" ]]; then
        log "creating $venv"
        "${PYTHON:-python3}" -m venv "$venv"
    fi
    if "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$name') != '$version')" 2>/dev/null \
        && [[ -x "$venv/bin/$executable" ]]; then
        log "$name $version already installed in $venv"
        return 0
    fi
    log "installing $dist==$version $note"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$dist==$version"
}
