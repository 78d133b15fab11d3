#!/usr/bin/env python3
"""The table of scripts/bench.sh: medians per configuration, tool and transport, each
one's ratio to h2load's median on the same configuration, and the goals of issue 4.

    bench-summary.py out/bench/runs.tsv
"""
import csv
import statistics
import sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
groups = defaultdict(list)
for r in rows:
    groups[(r["config"], r["tool"], r["transport"])].append(r)


def med(runs, f):
    values = [f(r) for r in runs]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def num(s):
    try:
        return float(s)
    except ValueError:
        return None


rate = lambda r: num(r["req_s"])
cpu = lambda r: (float(r["user_s"]) + float(r["sys_s"])) * 1e6 / int(r["n"])  # ms per 1k
rss = lambda r: int(r["rss_kb"]) / 1024
h2 = {c: med(rs, rate) for (c, t, _), rs in groups.items() if t == "h2load"}
h2cpu = {c: med(rs, cpu) for (c, t, _), rs in groups.items() if t == "h2load"}

order = {"c1x1000": 0, "c1x100": 1, "c2x1000": 2, "c1x1000-50ms": 3, "engine": 4, "engine-50ms": 5}
tools = {"h2load": 0, "apns-send": 1, "apns-bench": 2, "apns-send-100k": 3, "aioapns": 4, "engine-batch": 5,
         "engine-batch-main": 6, "singles-1000": 7, "singles-20000": 8}
fmt = "| {:<13} | {:<17} | {:<9} | {:>9} | {:>4} | {:>11} | {:>7} | {:>13} | {:>8} | {:>8} | {:>8} | {:>5} | {:>4} |"
print(fmt.format("config", "tool", "transport", "N", "runs", "req/s (med)", "×h2load", "CPU ms/1k", "×h2 CPU",
                 "RSS MB", "p50 ms", "p99 ms", "ok"))
print("|" + "|".join("-" * (w + 2) for w in (13, 17, 9, 9, 4, 11, 7, 13, 8, 8, 8, 5, 4)) + "|")
for (c, t, tr), rs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][2], tools.get(kv[0][1], 9))):
    r, cp = med(rs, rate), med(rs, cpu)
    p50 = med(rs, lambda x: num(x["p50_ms"]))
    mean = rs[0]["p50_ms"].startswith("mean:")
    if mean:
        p50 = med(rs, lambda x: num(x["p50_ms"][len("mean:"):]))
    p99 = med(rs, lambda x: num(x["p99_ms"]))
    ok = "yes" if all(x["ok"] == "yes" for x in rs) else "NO"
    print(fmt.format(c, t, tr, rs[0]["n"], len(rs), "%.0f" % r if r else "-",
                     "%.2f" % (r / h2[c]) if r and h2.get(c) else "-", "%.2f" % cp,
                     "%.2f" % (cp / h2cpu[c]) if h2cpu.get(c) else "-", "%.1f" % med(rs, rss),
                     ("~%.1f" % p50 if mean else "%.2f" % p50) if p50 is not None else "-",
                     "%.2f" % p99 if p99 is not None else "-", ok))
print("(h2load reports a mean, not percentiles: its p50 column holds ~mean. CPU and RSS: /usr/bin/time of the"
      " whole process. apns-send: req/s = N / wall time of the whole process, reading tokens and writing JSON Lines.)")

print("\nGoals (issue 4):")


def goal(text, ok):
    print("  [%s] %s" % ("met" if ok else "MISSED", text))


def g(c, t, tr):
    return groups.get((c, t, tr), [])


send = med(g("c1x1000", "apns-send", "nghttp2"), rate)
if send and h2.get("c1x1000"):
    goal("apns-send >= 0.5 x h2load on 1 connection x 1000 streams (nghttp2): %.2f x" % (send / h2["c1x1000"]),
         send / h2["c1x1000"] >= 0.5)
target = 0.9 * 1000 / 0.050
for t in ("apns-send", "apns-bench"):
    for tr in ("nghttp2", "curl"):
        r = med(g("c1x1000-50ms", t, tr), rate)
        if r:
            goal("%s %s at 50 ms RTT >= 0.9 x streams/RTT = %.0f/s: %.0f/s (%.2f x)" % (t, tr, target, r, r / 20000),
                 r >= target)
big, small = g("c1x1000", "apns-send", "nghttp2"), g("c1x1000", "apns-send-100k", "nghttp2")
if big and small:
    rb, rs_ = med(big, rss), med(small, rss)
    goal("apns-send peak RSS for %s tokens <= 64 MB: %.1f MB" % (big[0]["n"], rb), rb <= 64)
    goal("... and within 10%% of the 100k-token run (%.1f MB): %+.0f%%" % (rs_, (rb / rs_ - 1) * 100),
         rb <= rs_ * 1.1)
for (c, t, tr), rs in sorted(groups.items()):
    if t in ("apns-send", "apns-bench"):
        bad = [x for x in rs if x["jwts"] not in ("-",) and x["connections"] not in ("-",)
               and (int(x["jwts"]) != 1 or int(x["connections"]) != int(c[1]))]
        if bad:
            goal("%s %s %s: one JWT signature, %s connection(s): saw %s" % (
                c, t, tr, c[1], ", ".join("%s JWT / %s conn" % (x["jwts"], x["connections"]) for x in bad)), False)
print("  one JWT signature per client and exactly the connections asked for: every row not listed above")
for (c, t, tr), rs in sorted(groups.items()):
    if t in ("apns-send", "apns-bench") and h2cpu.get(c):
        x = med(rs, cpu) / h2cpu[c]
        goal("%s %s %s CPU per notification within 2 x h2load's: %.2f x" % (c, t, tr, x), x <= 2)

print("\nGoals (issue 9): per-event single sends against the batch, same mock, same session (medians)")
for c in ("engine", "engine-50ms"):
    batch = groups.get((c, "engine-batch", "nghttp2"))
    if not batch:
        continue
    b_rate, b_rss = med(batch, rate), med(batch, rss)
    for callers, goal in (("1000", 0.85), ("20000", 0.75)):
        rs = groups.get((c, "singles-" + callers, "nghttp2"))
        if not rs:
            continue
        r, m = med(rs, rate), med(rs, rss)
        # Each round's singles against that round's batch, taken minutes apart at most:
        # on a noisy machine the batch row alone swung 2x within one session.
        batch_by_round = {b["round"]: rate(b) for b in batch}
        paired = [rate(s) / batch_by_round[s["round"]] for s in rs
                  if rate(s) and batch_by_round.get(s["round"])]
        print("- %-11s %5s callers: rate %.2f x batch (paired by round %s; goal >= %.2f: %s); peak RSS %.1f MB = batch %+.1f MB (goal <= +64: %s)"
              % (c, callers, r / b_rate, "%.2f" % statistics.median(paired) if paired else "-", goal,
                 "met" if r / b_rate >= goal else "MISSED", m, m - b_rss, "met" if m - b_rss <= 64 else "MISSED"))

print("\nGoals: the batch loop from any caller (main actor = a main.swift's top-level `for await`), medians")
for c in ("engine", "engine-50ms"):
    task, main = groups.get((c, "engine-batch", "nghttp2")), groups.get((c, "engine-batch-main", "nghttp2"))
    if not task or not main:
        continue
    t_rate, m_rate = med(task, rate), med(main, rate)
    by_round = {b["round"]: rate(b) for b in task}
    paired = [rate(m) / by_round[m["round"]] for m in main if rate(m) and by_round.get(m["round"])]
    print("- %-11s main-actor loop %.0f/s = %.2f x the task loop %.0f/s (paired by round %s; goal >= 0.90: %s); RSS %.1f vs %.1f MB"
          % (c, m_rate, m_rate / t_rate, t_rate, ", ".join("%.2f" % p for p in paired) or "-",
             "met" if m_rate / t_rate >= 0.9 else "MISSED", med(main, rss), med(task, rss)))
    singles = groups.get((c, "singles-1000", "nghttp2"))
    if singles:
        s_rate = med(singles, rate)
        print("  %-11s main-actor loop %.2f x 1,000 concurrent single sends %.0f/s (goal >= 1.00: %s)"
              % ("", m_rate / s_rate, s_rate, "met" if m_rate >= s_rate else "MISSED"))
