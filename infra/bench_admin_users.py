"""Helper of infra/bench-admin-users.sh: seed users through the API, fill the database
directly, time the console's calls, report. Loopback only; every step is bounded."""
import argparse
import http.client
import json
import random
import sqlite3
import statistics
import subprocess
import time

ADMIN_PASSWORD = "bench-admin-password"
REPEAT = 40
# (name, path): what the console asks for when an admin opens and pages the user list.
CALLS = [
    ("list by name", "/api/v1/admin/users?limit=50"),
    ("list by usage, largest first", "/api/v1/admin/users?limit=50&sort=-usage"),
    ("list newest first", "/api/v1/admin/users?limit=50&sort=-created"),
    ("search 'user-42'", "/api/v1/admin/users?limit=50&q=user-42"),
    ("usage aggregates", "/api/v1/admin/usage"),
]


def conn(port):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def call(c, method, path, token=None, body=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    r = c.getresponse()
    data = r.read()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
    return json.loads(data) if data else None


def login(c):
    return call(c, "POST", "/api/v1/auth/login", body={"username": "admin", "password": ADMIN_PASSWORD})["token"]


def seed(a):
    c = conn(a.port)
    token = login(c)
    for i in range(a.count):
        call(c, "POST", "/api/v1/admin/users", token,
             {"username": f"seed-{i:03}", "password": f"seed-password-{i}", "role": "user"})


def fill(a):
    """Adds users up to `count` straight into the database (the password hash is a copy of
    an existing user's, so they look like any other row)."""
    rng = random.Random(7)
    now = int(time.time() * 1000)
    if a.db.startswith("sqlite:"):
        db = sqlite3.connect(a.db[len("sqlite:"):])
        have, pw = db.execute("SELECT count(*), max(password_hash) FROM users").fetchone()
        rows = [(f"user-{i:05}", f"user-{i:05}", pw, rng.randrange(0, 50 << 30), now + i, now + i)
                for i in range(a.count - have)]
        db.executemany("INSERT INTO users (username, username_key, password_hash, role, used_bytes, "
                       "created_at, updated_at) VALUES (?, ?, ?, 'user', ?, ?, ?)", rows)
        db.commit()
        db.close()
    else:
        sql = ("INSERT INTO users (username, username_key, password_hash, role, used_bytes, created_at, updated_at) "
               "SELECT 'user-' || lpad(g::text, 5, '0'), 'user-' || lpad(g::text, 5, '0'), "
               "(SELECT max(password_hash) FROM users), 'user', (random() * 53687091200)::bigint, "
               f"{now} + g, {now} + g FROM generate_series(0, {a.count} - (SELECT count(*) FROM users) - 1) g")
        subprocess.run(["psql", a.db, "-qc", sql], check=True, timeout=120)


def timed(c, path, token):
    t = time.perf_counter()
    out = call(c, "GET", path, token)
    return (time.perf_counter() - t) * 1000, out


def time_calls(a):
    c = conn(a.port)
    token = login(c)
    results = {}
    for name, path in CALLS:
        timed(c, path, token)  # warm
        ms = [timed(c, path, token)[0] for _ in range(REPEAT)]
        results[name] = ms
    # A deep page: follow the cursor 20 pages in, then time that page.
    cursor, path = None, "/api/v1/admin/users?limit=50"
    for _ in range(20):
        _, page = timed(c, path if cursor is None else f"{path}&cursor={cursor}", token)
        if not page["next_cursor"]:
            break
        cursor = page["next_cursor"]
    deep = f"{path}&cursor={cursor}" if cursor else path
    results["page 21 by name (cursor)"] = [timed(c, deep, token)[0] for _ in range(REPEAT)]
    users = call(c, "GET", "/api/v1/admin/usage", token)["users"]
    with open(a.out, "w") as f:
        json.dump({"users": users, "ms": results}, f)


def p95(v):
    return sorted(v)[int(len(v) * 0.95) - 1]


def report(a):
    small, big = (json.load(open(p)) for p in a.files)
    print(f"\n{a.label}: {small['users']} users vs {big['users']} users "
          f"(median / p95 of {REPEAT} requests, ms; ratio of medians)")
    print(f"{'call':34} {'small med':>9} {'p95':>7} {'big med':>9} {'p95':>7} {'ratio':>6}")
    for name, ms in small["ms"].items():
        b = big["ms"][name]
        ratio = statistics.median(b) / statistics.median(ms)
        print(f"{name:34} {statistics.median(ms):9.2f} {p95(ms):7.2f} {statistics.median(b):9.2f} {p95(b):7.2f} {ratio:6.2f}")


p = argparse.ArgumentParser()
sub = p.add_subparsers(dest="cmd", required=True)
s = sub.add_parser("seed"); s.add_argument("--port", type=int); s.add_argument("--count", type=int); s.add_argument("--db")
f = sub.add_parser("fill"); f.add_argument("--count", type=int); f.add_argument("--db")
t = sub.add_parser("time"); t.add_argument("--port", type=int); t.add_argument("--out")
r = sub.add_parser("report"); r.add_argument("--label"); r.add_argument("--users", type=int); r.add_argument("files", nargs=2)
a = p.parse_args()
{"seed": seed, "fill": fill, "time": time_calls, "report": report}[a.cmd](a)
