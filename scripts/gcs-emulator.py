"""gcp-storage-emulator with a listen backlog that holds a test's concurrent connections.

The emulator serves one request at a time from a stdlib `http.server.HTTPServer`, whose
listen backlog is 5. A client opening more connections at once than that (the record
store sends up to 32 GETs in one round, and the write log doubles the writes) has the
rest of its SYNs dropped while the server is busy, and on a loaded machine those
connections time out before the kernel's retransmission reaches them. This launcher
runs the same emulator, unchanged, with a backlog of 1024: requests are still handled
one at a time, so its conditional writes stay atomic. Loopback only.
"""

import socketserver
import sys

socketserver.TCPServer.request_queue_size = 1024

from gcp_storage_emulator.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "gcp-storage-emulator"
    sys.exit(main())
