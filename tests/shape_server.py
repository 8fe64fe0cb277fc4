"""A service of known shape, for `colosim shape`'s host test: an HTTP/1.1 server whose every
request runs `bursts` times (burn `burst_ms` of this thread's CPU, then — except after the last —
sleep `wait_ms`), then answers. One thread per connection (ThreadingHTTPServer), so with one
client one thread does all the work: fanout 1, `bursts` bursts of `burst_ms`, waits of `wait_ms`.

    python tests/shape_server.py --port 8080 --bursts 3 --burst-ms 4 --wait-ms 5
"""

from __future__ import annotations

import argparse
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def burn(ns: int) -> None:
    """Spin until this thread has had `ns` of CPU (thread CPU time: however busy the host)."""
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--bursts", type=int, default=3)
    ap.add_argument("--burst-ms", type=float, default=4.0)
    ap.add_argument("--wait-ms", type=float, default=5.0)
    args = ap.parse_args()
    burst_ns, wait_s = round(args.burst_ms * 1e6), args.wait_ms / 1e3
    body = b"ok\n"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: one connection, one thread, per client
        # headers and body go out in two writes: with Nagle's algorithm the body would wait
        # for the client's delayed ACK of the headers (40 ms on Linux), a wait of its own
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            for i in range(args.bursts):
                burn(burst_ns)
                if i < args.bursts - 1:
                    time.sleep(wait_s)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: object) -> None:  # noqa: A002 - the base class's name
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
