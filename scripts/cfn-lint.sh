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
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENV="$ROOT/.venv"

pinned_install "$VENV" cfn-lint "$CFN_LINT_VERSION" cfn-lint

cd "$ROOT"
if (($# == 0)); then
    set -- infra/template.yaml
fi
"$VENV/bin/cfn-lint" --version >&2
"$VENV/bin/cfn-lint" "$@"
log "no errors, no warnings: $*"
