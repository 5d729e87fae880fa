"""One probe request's round trip to a kernel, the way a test cell's read or call reaches the student's code.

    .venv/bin/python benchmarks/round_trip.py [--requests N]

In one kernel (ordinary, unsandboxed), the same cheap request (`names` of nothing) is sent N times as an
execute_request with a user expression, which is how the `start` request travels and how every request
travelled before the probe had a socket of its own, and then N times through that socket (`remote.Channel`).
Prints milliseconds per round trip, the CPU time of the grader and of the kernel per round trip, and the ratio.
"""
import argparse
import asyncio
import os
import resource
import sys
import time

from jupyter_client.manager import start_new_async_kernel

from attncourse.grading.protocol import remote

REQUEST = {"op": "names", "args": {"names": []}}


def kernel_cpu(pid) -> float:
    """Seconds of CPU the kernel process has used, all its threads."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def grader_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(label, send, n, pid):
    for _ in range(min(n, 200)):  # warm up
        send()
    wall, grader, kernel = time.perf_counter(), grader_cpu(), kernel_cpu(pid)
    for _ in range(n):
        send()
    wall, grader, kernel = (time.perf_counter() - wall, grader_cpu() - grader, kernel_cpu(pid) - kernel)
    print(f"{label:58s} {1000 * wall / n:8.3f} {1000 * grader / n:8.3f} {1000 * kernel / n:8.3f}")
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    loop = asyncio.new_event_loop()
    km, kc = loop.run_until_complete(start_new_async_kernel(kernel_name="python3"))
    try:
        start = {"op": "start", "args": {"chars": 100_000, "address": remote.LOOPBACK, "witness_key": "00" * 32,
                                         "watched": []}}
        address = loop.run_until_complete(remote.start(kc, km, start, 30, 5))["ok"]
        channel = remote.Channel(address, kc.session, km, 5)
        pid = km.provisioner.process.pid
        print(f"{'path':58s} {'ms/trip':>8s} {'grader':>8s} {'kernel':>8s}  (CPU ms per trip)")
        old = measure("execute_request with a user expression (before)",
                      lambda: loop.run_until_complete(remote.start(kc, km, REQUEST, 30, 5)), args.requests, pid)
        new = measure("the probe's own socket (remote.Channel)", lambda: channel.request(REQUEST, 30), args.requests, pid)
        print(f"\nratio: {old / new:.2f}x fewer milliseconds per round trip")
        channel.close()
    finally:
        kc.stop_channels()
        loop.run_until_complete(km.shutdown_kernel(now=True))
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
