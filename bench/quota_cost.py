"""What the storage quota costs a write's transaction: ``quotas.size_of`` of a typical HTTP
event plus ``usage.add_sync`` (the counter's one upsert), timed inside a SQLite (WAL)
transaction that has written already, as a run's does; against the same transaction without
them. The endpoint's check itself is a dict lookup (``StorageQuota.check``).

Run:  .venv/bin/python bench/quota_cost.py [--n 3000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import sqlalchemy as sa

from sluice.engine.state import quotas
from sluice.storage import usage
from sluice.storage.tables import metadata

EVENT = {
    "method": "POST",
    "path": "/",
    "query": {},
    "headers": {"content-type": "application/json", "user-agent": "bench"},
    "body": {"i": 12345},
}


def measure(n: int, counted: bool) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = sa.create_engine(f"sqlite:///{tmp}/quota.db")
        metadata.create_all(engine)
        with engine.begin() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
            conn.exec_driver_sql("CREATE TABLE w (i INTEGER)")
        out = []
        for i in range(n):
            with engine.begin() as conn:
                conn.exec_driver_sql("INSERT INTO w VALUES (1)")  # the run's own writes
                t0 = time.perf_counter()
                if counted:
                    usage.add_sync(conn, "u_bench", quotas.size_of(EVENT, {}), i)
                out.append((time.perf_counter() - t0) * 1e6)
        engine.dispose()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    for label, counted in (("quota on", True), ("quota off", False)):
        samples = sorted(measure(args.n, counted))
        p99 = samples[int(len(samples) * 0.99)]
        print(f"{label:10} p50 {statistics.median(samples):8.1f} us   p99 {p99:8.1f} us")


if __name__ == "__main__":
    main()
