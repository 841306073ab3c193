#!/usr/bin/env bash
# `sam validate --lint` on the SAM template, with the SAM CLI (PyPI
# aws-sam-cli, pinned) in its own venv, .tools/sam: its pins (boto3, cfn-lint,
# aws-sam-translator) would clash with moto's in .venv.
#
#   scripts/sam-validate.sh install   create .tools/sam and install aws-sam-cli if needed
#   scripts/sam-validate.sh           install if needed, then validate infra/template.yaml
#   scripts/sam-validate.sh FILE      validate another template
#
# Offline once installed (about 30 s, most of it cfn-lint's rules). `sam
# validate` needs a region (us-east-1 here; the template names none) and no
# credentials: the SAM transform and `--lint` (cfn-lint) run locally, and
# it passes with no AWS_* credentials set. Telemetry is off, and
# AWS_ENDPOINT_URL/AWS_PROFILE are unset for it, so CI's moto endpoint or a
# developer's profile play no part.
set -euo pipefail

SAM_CLI_VERSION="1.170.0"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENV="$ROOT/.tools/sam"

install() { pinned_install "$VENV" aws-sam-cli "$SAM_CLI_VERSION" sam "(about a minute)"; }

if [[ "${1:-}" == install ]]; then
    install
    exit 0
fi
install
template="${1:-infra/template.yaml}"
cd "$ROOT"
export SAM_CLI_TELEMETRY=0
"$VENV/bin/sam" --version >&2
env -u AWS_ENDPOINT_URL -u AWS_PROFILE "$VENV/bin/sam" validate --lint --region us-east-1 --template-file "$template"
log "valid, lint clean: $template"
