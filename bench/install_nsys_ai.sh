#!/usr/bin/env bash
# nsys-ai 0.3.0 in its own virtual environment under bench/.nsys-ai, for bench/run.py.
# nsys-ai reads a .sqlite export through DuckDB's sqlite_scanner extension, which DuckDB
# downloads on first use; offline that download fails (nsys-ai then waits and falls back to
# sqlite3), so the extension is installed from its PyPI wheel, with the DuckDB it matches, into
# DuckDB's extension folder for that version (~/.duckdb/extensions/v1.5.5: outside the venv).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python3 -m venv "$here/.nsys-ai"
"$here/.nsys-ai/bin/pip" install -q nsys-ai==0.3.0 duckdb==1.5.5 \
  duckdb-extension-sqlite-scanner==1.5.5 duckdb-extensions==1.5.5
"$here/.nsys-ai/bin/python" - <<'PY'
import duckdb
from duckdb_extensions import import_extension

import_extension("sqlite_scanner")
duckdb.connect().execute("LOAD sqlite_scanner")
print("nsys-ai with DuckDB", duckdb.__version__, "and sqlite_scanner")
PY
