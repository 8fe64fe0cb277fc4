"""One side of a request/response pair, for experiments/probe_arrangements.py: read a byte
from FIFO_IN, burn WORK_US of CPU, write a byte to FIFO_OUT, forever (side "a" sends the
first byte). A pair keeps one CPU busy between its two sides, each waking the other — the
shape of a server and its client (ClickHouse's TCPHandler and clickhouse-benchmark), with no
ClickHouse in it.

    python experiments/pingpong.py a|b FIFO_IN FIFO_OUT WORK_US [CPU]
    python experiments/pingpong.py duty WORK_US SLEEP_US

CPU: pin this side to that CPU (sched_setaffinity of this process only).
`duty`: burn WORK_US, sleep SLEEP_US (a timer), forever — as often asleep and awake as a
ping-pong side, but woken by a timer, not by a partner.
"""

from __future__ import annotations

import os
import sys
import time


def burn(us: float) -> None:
    end = time.thread_time() + us / 1e6
    while time.thread_time() < end:
        pass


def main() -> None:
    if sys.argv[1] == "duty":
        work, sleep = float(sys.argv[2]), float(sys.argv[3])
        while True:
            burn(work)
            time.sleep(sleep / 1e6)
    side, fifo_in, fifo_out, work = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    if len(sys.argv) > 5:
        os.sched_setaffinity(0, {int(sys.argv[5])})
    # open order avoids the FIFO deadlock: a opens out first, b opens in first
    if side == "a":
        out = os.open(fifo_out, os.O_WRONLY)
        inp = os.open(fifo_in, os.O_RDONLY)
        os.write(out, b"x")
    else:
        inp = os.open(fifo_in, os.O_RDONLY)
        out = os.open(fifo_out, os.O_WRONLY)
    while True:
        if not os.read(inp, 1):
            return
        burn(work)
        os.write(out, b"x")


if __name__ == "__main__":
    main()
