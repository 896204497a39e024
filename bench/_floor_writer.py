"""The ``stored`` mode's writer (bench/_floor.mjs): each stdin line is a JSON list of runs
``[id, result JSON]`` that one turn of the front's loop gathered; they are inserted in one
SQLite transaction (WAL, synchronous=NORMAL, as Sluice's database), and once it has committed
their ids go back as one line. A floor, not Sluice's schema: one row a run, its result as text.
usage: python3 _floor_writer.py SQLITE_FILE"""

import json
import sqlite3
import sys
import time


def main() -> None:
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, result TEXT, ts INTEGER)")
    out = sys.stdout
    n = 0
    for line in sys.stdin:
        runs = json.loads(line)
        now = int(time.time() * 1000)
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO runs VALUES (?, ?, ?)",
            [(f"r{n + i}", r[1], now) for i, r in enumerate(runs)],
        )
        db.execute("COMMIT")
        n += len(runs)
        out.write(json.dumps([r[0] for r in runs]) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
