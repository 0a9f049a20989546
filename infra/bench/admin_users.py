"""infra/bench-admin-users.sh — is the admin user list still fast at 10,000 users?

  infra/bench-admin-users.sh [--users N] [--gateway BIN]

Starts a gateway on SQLite in a temp dir (127.0.0.1, free port), times the console's calls
(user list first page in each sort, a deep page, a search, the usage aggregates) with 100
users, adds users up to N (default 10000) straight into the database (argon2 for 10,000
passwords would take minutes and is not what is measured), restarts the gateway and times
the same calls again. Prints median and p95 per call and the ratio N users / 100 users.
With PostgreSQL too when NIMBUS_BENCH_PG_URL is set (a database it may fill; it is reset).
The gateway is $NIMBUS_GATEWAY_BIN, else $CARGO_TARGET_DIR/release/nimbus-gateway (default
target dir /var/cache/nimbus/target). Loopback only; every step is bounded.
"""

import argparse
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time

from . import common

log = common.Log("bench-admin-users")
REPEAT = 40
# (name, path): what the console asks for when an admin opens and pages the user list.
CALLS = [
    ("list by name", "/api/v1/admin/users?limit=50"),
    ("list by usage, largest first", "/api/v1/admin/users?limit=50&sort=-usage"),
    ("list newest first", "/api/v1/admin/users?limit=50&sort=-created"),
    ("search 'user-42'", "/api/v1/admin/users?limit=50&q=user-42"),
    ("usage aggregates", "/api/v1/admin/usage"),
]


def call(port, method, path, token=None, body=None):
    st, out = common.http_json(port, method, path, body, token)
    if st >= 300:
        raise common.Fatal(f"{method} {path}: {st} {str(out)[:300]}")
    return out


def seed(port, count):
    token = common.login(port)
    for i in range(count):
        call(port, "POST", "/api/v1/admin/users", token,
             {"username": f"seed-{i:03}", "password": f"seed-password-{i}", "role": "user"})


def fill(db_url, count):
    """Adds users up to `count` straight into the database (the password hash is a copy of
    an existing user's, so they look like any other row)."""
    rng = random.Random(7)
    now = int(time.time() * 1000)
    if db_url.startswith("sqlite:"):
        db = sqlite3.connect(db_url[len("sqlite:"):])
        have, pw = db.execute("SELECT count(*), max(password_hash) FROM users").fetchone()
        rows = [(f"user-{i:05}", f"user-{i:05}", pw, rng.randrange(0, 50 << 30), now + i, now + i)
                for i in range(count - have)]
        db.executemany("INSERT INTO users (username, username_key, password_hash, role, used_bytes, "
                       "created_at, updated_at) VALUES (?, ?, ?, 'user', ?, ?, ?)", rows)
        db.commit()
        db.close()
    else:
        sql = ("INSERT INTO users (username, username_key, password_hash, role, used_bytes, created_at, updated_at) "
               "SELECT 'user-' || lpad(g::text, 5, '0'), 'user-' || lpad(g::text, 5, '0'), "
               "(SELECT max(password_hash) FROM users), 'user', (random() * 53687091200)::bigint, "
               f"{now} + g, {now} + g FROM generate_series(0, {count} - (SELECT count(*) FROM users) - 1) g")
        subprocess.run(["psql", db_url, "-qc", sql], check=True, timeout=120)


def time_calls(port):
    """{"users": N, "ms": {call: [ms, ...]}}: each call once to warm, then REPEAT times on one
    keep-alive connection."""
    import http.client
    import json
    token = common.login(port)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def timed(path):
        t = time.perf_counter()
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        data = r.read()
        ms = (time.perf_counter() - t) * 1000
        if r.status >= 300:
            raise common.Fatal(f"GET {path}: {r.status} {data[:300]!r}")
        return ms, json.loads(data)

    results = {}
    for name, path in CALLS:
        timed(path)  # warm
        results[name] = [timed(path)[0] for _ in range(REPEAT)]
    # A deep page: follow the cursor 20 pages in, then time that page.
    cursor, path = None, "/api/v1/admin/users?limit=50"
    for _ in range(20):
        _, page = timed(path if cursor is None else f"{path}&cursor={cursor}")
        if not page["next_cursor"]:
            break
        cursor = page["next_cursor"]
    deep = f"{path}&cursor={cursor}" if cursor else path
    results["page 21 by name (cursor)"] = [timed(deep)[0] for _ in range(REPEAT)]
    users = timed("/api/v1/admin/usage")[1]["users"]
    conn.close()
    return {"users": users, "ms": results}


def format_report(label, small, big):
    """The table of one database: median and p95 per call, small and big, ratio of medians."""
    lines = ["", f"{label}: {small['users']} users vs {big['users']} users "
                 f"(median / p95 of {REPEAT} requests, ms; ratio of medians)",
             f"{'call':34} {'small med':>9} {'p95':>7} {'big med':>9} {'p95':>7} {'ratio':>6}"]
    for name, ms in small["ms"].items():
        b = big["ms"][name]
        ratio = statistics.median(b) / statistics.median(ms)
        lines.append(f"{name:34} {statistics.median(ms):9.2f} {common.percentile(ms, 95):7.2f} "
                     f"{statistics.median(b):9.2f} {common.percentile(b, 95):7.2f} {ratio:6.2f}")
    return "\n".join(lines)


class Bench:
    def __init__(self, gateway, users):
        self.gateway, self.users = gateway, users
        self.tmp = common.make_temp_dir("nimbus-bench-users.")
        self.port = common.free_port()
        self.procs = common.Procs(log)

    def start(self, db_url):
        extra = ["--database-url", db_url] if db_url else []
        return common.start_gateway(self.procs, self.gateway, self.port, f"{self.tmp}/data", extra,
                                    f"{self.tmp}/gw.log", wait="/healthz")

    def run(self):
        self.run_one("sqlite")
        pg = os.environ.get("NIMBUS_BENCH_PG_URL")
        if pg:
            subprocess.run(["psql", pg, "-qc", "DROP SCHEMA public CASCADE; CREATE SCHEMA public;"],
                           check=True, stdout=subprocess.DEVNULL, timeout=120)
            self.run_one("postgresql", pg)
        return 0

    def run_one(self, label, db_url=None):
        common.remove_tree(f"{self.tmp}/data")
        db = db_url or f"sqlite:{self.tmp}/data/nimbus.db"
        gw = self.start(db_url)
        seed(self.port, 99)
        small = time_calls(self.port)
        self.procs.stop(gw)
        fill(db, self.users)
        gw = self.start(db_url)
        big = time_calls(self.port)
        self.procs.stop(gw)
        print(format_report(label, small, big), flush=True)

    def cleanup(self):
        self.procs.stop_all()
        common.remove_tree(self.tmp)


def main(argv=None):
    p = argparse.ArgumentParser(prog="infra/bench-admin-users.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--users", type=int, default=10000, help="users in the big run (default 10000)")
    p.add_argument("--gateway", help="gateway binary")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    target = os.environ.get("CARGO_TARGET_DIR") or "/var/cache/nimbus/target"
    gateway = a.gateway or os.environ.get("NIMBUS_GATEWAY_BIN") or f"{target}/release/nimbus-gateway"
    if not os.access(gateway, os.X_OK):
        print(f"no gateway binary at {gateway}: cargo build --release -p nimbus-gateway, or pass --gateway",
              file=sys.stderr)
        sys.exit(2)
    common.run_bench(log, lambda: Bench(gateway, a.users))


if __name__ == "__main__":
    main()
