#!/usr/bin/env bash
# Python tools the tests and the benchmark use besides moto, pinned, in the
# repo's .venv:
#   pyarrow  reads back the Parquet that Persist writes (an independent reader),
#            is a peer in the benchmark and its exactness check (bench/check.py);
#   duckdb   a second independent reader (tests/tests/it/persist_readback.rs),
#            and a peer in the benchmark.
#            Pinned to 1.5.6, not 2.0.1: 2.0.1's read_parquet(union_by_name)
#            fails with "INTERNAL Error: Operation requires a flat vector"
#            when one file has a null struct row and a later file adds a
#            nested struct field to it (a normal evolution; 1.5.6 reads it);
#   polars   a peer in the benchmark (bench/peer.py: read_ndjson +
#            write_parquet); 2.1.0, the newest on PyPI for issue 28. Its
#            wheel carries its engine (polars-runtime-32): seconds to install;
#   pyiceberg reads the Iceberg tables of the lake's local SQL catalog
#            (tests/tests/it/iceberg.rs), with its SQLite and pyarrow extras
#            (pyarrow stays at the pin above: pyiceberg asks >= 18);
#   pyspark  a third one, Spark as Glue and EMR read the lake
#            (tests/readers/readers.py, tests/tests/it/readers.rs). It needs a
#            Java 17 or newer on PATH; the install stops, saying so, without.
#            About a minute from a cold venv and pip cache (pip builds a
#            457 MB wheel from the sdist).
#
# and, in a venv of its own, .tools/duckdb-iceberg, DuckDB with its iceberg
# extension (tests/tests/it/iceberg.rs reads the lake's Iceberg tables with
# it): duckdb 1.4.4 with the PyPI wheels carrying the iceberg and avro
# extension binaries for it (duckdb-ext-*, versions 1.4.4.<build date>), so
# nothing is downloaded by DuckDB at run time. A venv of its own because an
# extension loads only into the duckdb it was built for, and .venv keeps
# duckdb 1.5.6 (see above). About 160 MB, seconds to install.
#
# and, on request only (the benchmark's, not the tests'), .tools/dlt: dlt
# with its parquet extra, the peer of `tributary run` in scripts/bench-run.sh
# (bench/dlt_run.py). A venv of its own so that its dependencies never move
# the pins above. About 25 s to install.
#
#   scripts/python-tools.sh install
#   scripts/python-tools.sh dlt
set -euo pipefail

PYARROW_VERSION="26.0.1"
DUCKDB_VERSION="1.5.6"
# DuckDB (1.5 and 1.4) returns TIMESTAMP WITH TIME ZONE values to Python through pytz.
PYTZ_VERSION="2025.2"
POLARS_VERSION="2.1.0"
DLT_VERSION="1.31.0"
PYSPARK_VERSION="4.3.0"
PYICEBERG_VERSION="0.12.0"
# pyspark 4.x runs on Java 17 and 21.
JAVA_MIN_MAJOR=17
# DuckDB with its iceberg extension, in DUCKDB_ICEBERG_VENV.
DUCKDB_ICEBERG_DUCKDB_VERSION="1.4.4"
DUCKDB_ICEBERG_EXT_VERSION="1.4.4.20260205"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
DUCKDB_ICEBERG_VENV="$ROOT/.tools/duckdb-iceberg"

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

# ensure_extras MODULE VERSION EXTRAS: as ensure, installing MODULE[EXTRAS]==VERSION
# together with the pinned pyarrow (so the extras never move it).
ensure_extras() {
    local module="$1" version="$2" extras="$3"
    if "$VENV/bin/python" -c "import $module, sys; sys.exit($module.__version__ != '$version')" 2>/dev/null; then
        echo "python-tools.sh: $module $version already installed" >&2
    else
        echo "python-tools.sh: installing $module[$extras]==$version" >&2
        "$VENV/bin/pip" install --quiet --disable-pip-version-check "$module[$extras]==$version" \
            "pyarrow==$PYARROW_VERSION"
    fi
}

# ensure_duckdb_iceberg: installs duckdb and its iceberg and avro extension
# wheels, pinned, with pytz (for timestamptz values, as in .venv), in
# DUCKDB_ICEBERG_VENV unless those versions are there.
ensure_duckdb_iceberg() {
    local venv="$DUCKDB_ICEBERG_VENV"
    [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
    if "$venv/bin/python" -c "
import sys
from importlib.metadata import version
sys.exit((version('duckdb'), version('duckdb-ext-iceberg'), version('duckdb-ext-avro'), version('pytz'))
         != ('$DUCKDB_ICEBERG_DUCKDB_VERSION', '$DUCKDB_ICEBERG_EXT_VERSION', '$DUCKDB_ICEBERG_EXT_VERSION',
             '$PYTZ_VERSION'))
" 2>/dev/null; then
        echo "python-tools.sh: duckdb $DUCKDB_ICEBERG_DUCKDB_VERSION with iceberg $DUCKDB_ICEBERG_EXT_VERSION" \
            "already installed in $venv" >&2
    else
        echo "python-tools.sh: installing duckdb==$DUCKDB_ICEBERG_DUCKDB_VERSION with" \
            "duckdb-ext-iceberg/avro==$DUCKDB_ICEBERG_EXT_VERSION in $venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check "duckdb==$DUCKDB_ICEBERG_DUCKDB_VERSION" \
            "duckdb-ext-iceberg==$DUCKDB_ICEBERG_EXT_VERSION" "duckdb-ext-avro==$DUCKDB_ICEBERG_EXT_VERSION" \
            "pytz==$PYTZ_VERSION"
    fi
}

# require_java: exits 1 with what to do unless a Java >= JAVA_MIN_MAJOR is on PATH.
require_java() {
    if ! command -v java >/dev/null 2>&1; then
        echo "python-tools.sh: java is not on PATH: pyspark $PYSPARK_VERSION needs Java $JAVA_MIN_MAJOR or newer" \
            "(Debian: apt-get install openjdk-17-jre-headless, or set PATH/JAVA_HOME)" >&2
        exit 1
    fi
    # `java -version` prints `openjdk version "17.0.15" ...` (or "1.8.0_x" for Java 8) on stderr.
    local version major
    version="$(java -version 2>&1 | awk -F'"' '/version/ { print $2; exit }')"
    major="${version%%.*}"
    [[ "$major" == 1 ]] && major="$(echo "$version" | cut -d. -f2)"
    if ! [[ "$major" =~ ^[0-9]+$ ]] || (( major < JAVA_MIN_MAJOR )); then
        echo "python-tools.sh: $(command -v java) is Java '$version': pyspark $PYSPARK_VERSION needs" \
            "Java $JAVA_MIN_MAJOR or newer" >&2
        exit 1
    fi
}

case "${1:-}" in
install)
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    ensure pyarrow "$PYARROW_VERSION"
    ensure duckdb "$DUCKDB_VERSION"
    ensure pytz "$PYTZ_VERSION"
    ensure polars "$POLARS_VERSION"
    ensure_extras pyiceberg "$PYICEBERG_VERSION" "sql-sqlite,pyarrow"
    ensure_duckdb_iceberg
    require_java
    ensure pyspark "$PYSPARK_VERSION"
    ;;
dlt)
    venv="$ROOT/.tools/dlt"
    [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
    if "$venv/bin/python" -c "import dlt, sys; sys.exit(dlt.__version__ != '$DLT_VERSION')" 2>/dev/null; then
        echo "python-tools.sh: dlt $DLT_VERSION already installed in $venv" >&2
    else
        echo "python-tools.sh: installing dlt[parquet]==$DLT_VERSION in $venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check "dlt[parquet]==$DLT_VERSION"
    fi
    ;;
*)
    echo "usage: $0 install | dlt" >&2
    exit 2
    ;;
esac
