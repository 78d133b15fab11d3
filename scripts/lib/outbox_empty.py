#!/usr/bin/env python3
"""Waits until an apns-server store's outbox is empty, from one open connection, and
prints the wall time (seconds since the epoch, as `date +%s.%N`) at which it first
saw it empty.

    outbox_empty.py sqlite:PATH    the SQLite file, read with Python's sqlite3
    outbox_empty.py psql:CONNINFO  PostgreSQL (a postgresql:// URI or a database name),
                                   through one psql session ($PSQL, else psql on PATH)

It connects first and prints "ready", then waits for a line on stdin (the request
was answered) before it polls, every 5 ms, whether any outbox row is left. A bench
starts it before its clock starts: a process and a connection per poll took about
a tenth of a second of CPU each, from a server measured on a machine with two cores.

It gives up, printing nothing and exiting 1, after --timeout seconds (600) or as
soon as the process that started it is gone.
"""
import os
import subprocess
import sys
import time

POLL_SECONDS = 0.005
QUERY = "SELECT NOT EXISTS (SELECT 1 FROM outbox)"


def sqlite_probe(path):
    import sqlite3
    db = sqlite3.connect(path, timeout=30, isolation_level=None)  # autocommit: a fresh snapshot each read
    return lambda: db.execute(QUERY).fetchone()[0] == 1


def psql_probe(conninfo):
    psql = subprocess.Popen([os.environ.get("PSQL", "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                             "-d", conninfo],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def empty():
        psql.stdin.write(QUERY + ";\n")
        psql.stdin.flush()
        line = psql.stdout.readline()
        if not line:
            sys.exit("outbox_empty: psql ended")
        return line.strip() == "t"
    return empty


def main():
    args = sys.argv[1:]
    timeout = 600.0
    if len(args) == 3 and args[1] == "--timeout":
        timeout = float(args[2])
        args = args[:1]
    if len(args) != 1 or not args[0].startswith(("sqlite:", "psql:")):
        sys.exit("usage: outbox_empty.py sqlite:PATH|psql:CONNINFO [--timeout SECONDS]")
    kind, _, where = args[0].partition(":")
    empty = sqlite_probe(where) if kind == "sqlite" else psql_probe(where)
    empty()  # connected, and the table is there
    parent = os.getppid()
    print("ready", flush=True)
    if not sys.stdin.readline():
        sys.exit(1)
    deadline = time.monotonic() + timeout
    while not empty():
        if time.monotonic() > deadline or os.getppid() != parent:
            sys.exit(1)
        time.sleep(POLL_SECONDS)
    print(f"{time.time():.6f}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # one line, not a trace
        sys.exit(f"outbox_empty: {error}")
