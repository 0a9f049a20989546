"""Unit tests of infra/bench/admin_users.py: the report's medians, p95s and ratios, and the
direct fill of a SQLite users table."""

import sqlite3
import tempfile
import unittest

from infra.bench import admin_users


class ReportTest(unittest.TestCase):
    def test_table(self):
        small = {"users": 100, "ms": {"list by name": [float(i) for i in range(1, 41)]}}
        big = {"users": 10000, "ms": {"list by name": [float(i) * 3 for i in range(1, 41)]}}
        lines = admin_users.format_report("sqlite", small, big).splitlines()
        self.assertEqual(lines[1], "sqlite: 100 users vs 10000 users (median / p95 of 40 requests, ms; ratio of medians)")
        self.assertEqual(lines[2].split(), ["call", "small", "med", "p95", "big", "med", "p95", "ratio"])
        # median of 1..40 is 20.5, p95 (nearest rank) is 38; ×3 for the big run.
        self.assertEqual(lines[3], f"{'list by name':34}     20.50   38.00     61.50  114.00   3.00")


class FillTest(unittest.TestCase):
    def test_sqlite_fill_up_to_count(self):
        with tempfile.TemporaryDirectory() as d:
            db = sqlite3.connect(f"{d}/n.db")
            db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT, username_key TEXT UNIQUE, "
                       "password_hash TEXT, role TEXT, used_bytes INTEGER, created_at INTEGER, updated_at INTEGER)")
            db.execute("INSERT INTO users (username, username_key, password_hash, role, used_bytes, created_at, "
                       "updated_at) VALUES ('admin', 'admin', '$argon2id$x', 'admin', 0, 1, 1)")
            db.commit()
            admin_users.fill(f"sqlite:{d}/n.db", 250)
            n, hashes, biggest = db.execute(
                "SELECT count(*), count(DISTINCT password_hash), max(used_bytes) FROM users").fetchone()
            db.close()
        self.assertEqual((n, hashes), (250, 1))
        self.assertLess(biggest, 50 << 30)


if __name__ == "__main__":
    unittest.main()
