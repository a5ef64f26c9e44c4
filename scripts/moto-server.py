"""moto_server with its request handling serialised, so conditional writes are atomic as in S3.

moto's own `moto_server` runs werkzeug threaded, and its S3 backend checks an
If-Match / If-None-Match condition and then writes without a lock, so two
concurrent writers can both pass the check. S3 decides each conditional write
atomically. This launcher runs the same moto application (every service on one
endpoint) behind one lock: requests still arrive on many connections, but the
backend handles them one at a time. Loopback only.
"""

import argparse
import os
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

try:  # moto's request handler; optional across versions
    from moto.moto_server.werkzeug_app import MotoRequestHandler  # type: ignore
except Exception:  # pragma: no cover
    MotoRequestHandler = None


def serialised(app):
    lock = threading.Lock()

    def wrapped(environ, start_response):
        with lock:
            # Consume the whole response inside the lock: the write happens while it is held.
            return list(app(environ, start_response))

    return wrapped


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-H", "--host", default="127.0.0.1")
    p.add_argument("-p", "--port", type=int, required=True)
    a = p.parse_args()
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("moto-server.py serves on loopback only")
    os.environ.setdefault("MOTO_PORT", str(a.port))
    app = DomainDispatcherApplication(create_backend_app)
    kwargs = {"threaded": True}
    if MotoRequestHandler is not None:
        kwargs["request_handler"] = MotoRequestHandler
    run_simple(a.host, a.port, serialised(app), **kwargs)


if __name__ == "__main__":
    main()
