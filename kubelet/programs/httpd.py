"""nginx/httpd in kubemu's image catalog: a static HTTP server.

    httpd.py --port PORT [--root DIR]

Serves DIR's files (GET/HEAD), or without --root a welcome page, as nginx's image does. In a
pod's own network namespace it listens on every address, as nginx does: the namespace holds only
the pod's loopback and its eth0. In the host's network (a hostNetwork pod, or kubemu without pod
networks) it binds the loopback address only, never every interface of the machine, with
SO_REUSEPORT: replicas of one Deployment on this machine then share the port and the kernel
spreads connections among them. SIGTERM stops it at once with exit 0 (nginx's fast shutdown)."""
import argparse
import functools
import http.server
import os
import signal
import socket
import sys

from kubemu.netnsinfo import listen_address

WELCOME = b"""<!DOCTYPE html>
<html><head><title>Welcome to kubemu!</title></head>
<body><h1>Welcome to kubemu!</h1>
<p>This static HTTP server stands in for the container's image (kubemu's image catalog).</p>
<p>Pod: %s</p></body></html>
"""


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()


class Welcome(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.split("?")[0] not in ("/", "/index.html"):
            self.send_error(404)
            return
        body = WELCOME % os.environ.get("HOSTNAME", "").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    do_HEAD = do_GET


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--root", help="serve this directory's files (default: a welcome page)")
    args = p.parse_args()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=args.root) if args.root else Welcome
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    address = listen_address()
    try:
        server = Server((address, args.port), handler)
    except OSError as err:
        print(f"httpd: cannot listen on {address}:{args.port}: {err.strerror}", file=sys.stderr)
        return 1
    print(f"httpd: serving {args.root or 'a welcome page'} on http://{address}:{args.port}/", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
