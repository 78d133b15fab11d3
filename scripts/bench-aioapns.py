#!/usr/bin/env python3
"""A peer row for BENCHMARKS.md: aioapns (PyPI) against apns-mock on loopback.

    bench-aioapns.py --port PORT --pki DIR [--requests N] [--concurrency N] [--connections N]

DIR is scripts/gen-pki.sh's output: the provider key and ids, and ca.pem, the only CA
trusted (verification stays on). Prints one JSON object with the keys apns-bench
--json uses (req_per_s, latency_us, cpu_ms_per_1k, peak_rss_bytes, statuses).
Install first: pip install aioapns (never vendored).
"""
import argparse
import asyncio
import json
import logging
import resource
import ssl
import time

from aioapns import APNs, NotificationRequest, PushType
from aioapns.connection import APNsProductionClientProtocol

PAYLOAD = {"aps": {"alert": {"title": "Order update", "body": "x" * 150}, "sound": "default"}, "id": 12345}


def read_ids(pki):
    with open(f"{pki}/ids.env") as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)


def loopback_protocol(port):
    """aioapns dials APNS_SERVER:APNS_PORT of its protocol class: aim it at the mock, nowhere else."""
    class Mock(APNsProductionClientProtocol):
        APNS_SERVER = "127.0.0.1"
        APNS_PORT = port
    return Mock


def tls_context(ca_file):
    ctx = ssl.create_default_context(cafile=ca_file)  # the mock's CA, hostname checked
    ctx.set_alpn_protocols(["h2"])
    return ctx


async def bench(args):
    ids = read_ids(args.pki)
    with open(f"{args.pki}/AuthKey_{ids['KEY_ID']}.p8") as f:
        key = f.read()
    client = APNs(key=key, key_id=ids["KEY_ID"], team_id=ids["TEAM_ID"], topic=ids["TOPIC"],
                  max_connections=args.connections, ssl_context=tls_context(f"{args.pki}/ca.pem"))
    client.pool.protocol_class = loopback_protocol(args.port)

    latencies, statuses = [], {}
    window = asyncio.Semaphore(args.concurrency)

    async def one(i):
        async with window:
            start = time.perf_counter()
            request = NotificationRequest(device_token="ef" * 24 + "%016x" % i, message=PAYLOAD,
                                          push_type=PushType.ALERT)
            result = await client.send_notification(request)
            latencies.append(int((time.perf_counter() - start) * 1e6))
            statuses[result.status] = statuses.get(result.status, 0) + 1

    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    # Tasks are made in chunks so the pending set stays near the window, as a real sender's would.
    pending = set()
    for i in range(1, args.requests + 1):
        pending.add(asyncio.ensure_future(one(i)))
        if len(pending) >= 2 * args.concurrency:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    if pending:
        await asyncio.wait(pending)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    client.pool.close()

    latencies.sort()
    pick = lambda p: latencies[min(len(latencies) - 1, int(len(latencies) * p / 100))]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "client": "aioapns", "requests": args.requests, "connections": args.connections,
        "streams": args.concurrency, "seconds": seconds, "req_per_s": args.requests / seconds,
        "statuses": {str(k): v for k, v in statuses.items()}, "succeeded": statuses.get("200", statuses.get(200, 0)),
        "latency_us": {"min": latencies[0], "p50": pick(50), "p95": pick(95), "p99": pick(99),
                       "p99.9": pick(99.9), "max": latencies[-1]},
        "cpu_user_s": after.ru_utime - before.ru_utime, "cpu_sys_s": after.ru_stime - before.ru_stime,
        "cpu_ms_per_1k": cpu * 1e6 / args.requests, "peak_rss_bytes": after.ru_maxrss * 1024,
    }


def main():
    # aioapns warns on every poll of a busy pool; printing that would be most of the run's cost.
    logging.getLogger("aioapns").setLevel(logging.ERROR)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pki", required=True)
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--concurrency", type=int, default=1000)
    p.add_argument("--connections", type=int, default=1)
    print(json.dumps(asyncio.run(bench(p.parse_args()))))


if __name__ == "__main__":
    main()
