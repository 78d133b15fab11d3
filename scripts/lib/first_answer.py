"""When a running apns-mock first answers one more request: the wall time (as
date +%s.%N prints it) at which its count of requests first passed the count it
had when this started. It asks for the count with SIGUSR1 (the mock writes its
statistics to its --stats file) every few milliseconds, and stops asking once it
has the answer, so that the rest of a run is not disturbed.

    python3 first_answer.py MOCK_PID STATS_FILE [TIMEOUT_S]    prints "ready", then the time
"""
import json, os, signal, sys, time

pid, stats, timeout = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 120


def requests():
    """The mock's count, asked for now: None until a complete file is read back."""
    before = os.stat(stats).st_mtime_ns if os.path.exists(stats) else 0
    os.kill(pid, signal.SIGUSR1)
    for _ in range(200):
        time.sleep(0.001)
        try:
            if os.stat(stats).st_mtime_ns == before:
                continue
            with open(stats) as f:
                return json.load(f)["requests"]
        except (OSError, ValueError, KeyError):
            continue
    return None


baseline = None
while baseline is None:
    baseline = requests()
print("ready", flush=True)
deadline = time.time() + timeout
while time.time() < deadline:
    n = requests()
    if n is not None and n > baseline:
        print(f"{time.time():.6f}", flush=True)
        sys.exit(0)
    time.sleep(0.004)
print("none", flush=True)
