"""The results of `planc tune`: one SQLite row per candidate, written as each one finishes.

An interrupted run loses at most the candidates being evaluated; running the same command
again skips every candidate already in the store (`planc tune` resumes). SQLite is in Python's
standard library and survives a kill at any point (each row is its own transaction).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS candidates (
    key TEXT PRIMARY KEY,
    model TEXT, arch TEXT,
    decisions TEXT NOT NULL,            -- JSON: one value per dimension of the space
    status TEXT NOT NULL,               -- scored | refused (planc cannot compile it)
    modeled_time_s REAL, device_bytes INTEGER,
    verdict TEXT,                       -- for the verified best: check and simulate results
    error TEXT, eval_s REAL, worker TEXT,
    position INTEGER,                   -- order of evaluation (arrival)
    sequence INTEGER,                   -- order of proposal: the tie-break of the ranking
    reason TEXT,                        -- a refused candidate's kind of error (`reason_of`)
    static_s REAL                       -- ARK plans: the static-distribution roofline's time
);
CREATE TABLE IF NOT EXISTS study (name TEXT PRIMARY KEY, value TEXT);
"""
ADDED_COLUMNS = {"sequence": "INTEGER", "reason": "TEXT", "static_s": "REAL"}
"""Columns a store written before they existed lacks (added when it is opened)."""


class Store:
    def __init__(self, directory: str | Path):
        self.path = Path(directory) / "tune.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(candidates)")}
        for name, kind in ADDED_COLUMNS.items():
            if name not in columns:
                with self.db:
                    self.db.execute(f"ALTER TABLE candidates ADD COLUMN {name} {kind}")

    def close(self) -> None:
        self.db.close()

    def done(self) -> set[str]:
        return {key for (key,) in self.db.execute("SELECT key FROM candidates")}

    def add(self, row: dict[str, Any]) -> None:
        position = self.db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO candidates (key, model, arch, decisions, status, "
                "modeled_time_s, device_bytes, error, eval_s, worker, position, sequence, "
                "reason, static_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row["key"], row.get("model"), row.get("arch"), json.dumps(row["decisions"]),
                 row["status"], row.get("modeled_time_s"), row.get("device_bytes"),
                 row.get("error"), row.get("eval_s"), row.get("worker"), position,
                 row.get("sequence", position), row.get("reason"), row.get("static_s")))

    def set_verdict(self, key: str, verdict: dict[str, Any]) -> None:
        with self.db:
            self.db.execute("UPDATE candidates SET verdict = ? WHERE key = ?",
                            (json.dumps(verdict), key))

    def rows(self, model: str | None = None, arch: str | None = None) -> list[dict[str, Any]]:
        query = "SELECT * FROM candidates"
        cursor = self.db.execute(query + " ORDER BY position")
        names = [c[0] for c in cursor.description]
        rows = [dict(zip(names, values, strict=True)) for values in cursor]
        for row in rows:
            row["decisions"] = json.loads(row["decisions"])
            row["verdict"] = json.loads(row["verdict"]) if row["verdict"] else None
            if row["sequence"] is None:      # a store from before proposals were numbered
                row["sequence"] = row["position"]
        return [r for r in rows if (model is None or r["model"] == model)
                and (arch is None or r["arch"] == arch)]

    def set(self, name: str, value: Any) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO study VALUES (?, ?)",
                            (name, json.dumps(value)))

    def get(self, name: str, default: Any = None) -> Any:
        found = self.db.execute("SELECT value FROM study WHERE name = ?", (name,)).fetchone()
        return json.loads(found[0]) if found else default
