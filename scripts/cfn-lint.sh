#!/usr/bin/env bash
# Lint the SAM template with cfn-lint (pinned, installed into the repo's .venv).
#
#   scripts/cfn-lint.sh            install cfn-lint if needed, lint infra/template.yaml
#   scripts/cfn-lint.sh FILE...    lint other templates
#
# Exit status: cfn-lint's (0 = no errors and no warnings). Works offline once
# installed: cfn-lint ships its resource schemas and validates SAM resources
# (AWS::Serverless::*) against SAM's own schema.
# moto[server] (scripts/moto.sh install) also brings a cfn-lint; this pins it.
set -euo pipefail

CFN_LINT_VERSION="1.58.0"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"

log() { echo "cfn-lint.sh: $*" >&2; }

if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('cfn-lint') != '$CFN_LINT_VERSION')" 2>/dev/null \
    || [[ ! -x "$VENV/bin/cfn-lint" ]]; then
    log "installing cfn-lint==$CFN_LINT_VERSION"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "cfn-lint==$CFN_LINT_VERSION"
fi

cd "$ROOT"
if (($# == 0)); then
    set -- infra/template.yaml
fi
"$VENV/bin/cfn-lint" --version >&2
"$VENV/bin/cfn-lint" "$@"
log "no errors, no warnings: $*"
