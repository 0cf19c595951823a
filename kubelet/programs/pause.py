"""registry.k8s.io/pause: sleep until SIGTERM or SIGINT, then exit 0 (as /pause does)."""
import signal
import sys

for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: sys.exit(0))
while True:
    signal.pause()
