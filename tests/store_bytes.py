"""Everything a store holds, as text, for tests that look for a planted value: the SQLite file's
raw bytes (with its -wal and -shm), or every row of every table of a PostgreSQL schema."""

from __future__ import annotations

import glob
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
from conftest import PG_URL


def store_text(db_url: str) -> str:
    if db_url.startswith("sqlite:"):
        path = db_url.removeprefix("sqlite:///")
        data = b"".join(Path(p).read_bytes() for p in sorted(glob.glob(path + "*")))
        return data.decode("latin-1")
    schema = parse_qs(urlsplit(db_url).query)["schema"][0]
    out: list[str] = []
    with psycopg.connect(PG_URL) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
        for (table,) in tables:
            rows = conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t').fetchall()
            out.extend(str(r[0]) for r in rows)
    return "\n".join(out)
