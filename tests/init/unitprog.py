"""Programs the supervisor tests run as units: `python unitprog.py MODE [ARG]`."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from kubemu.sdnotify import notify  # noqa: E402

mode = sys.argv[1]
arg = sys.argv[2] if len(sys.argv) > 2 else None

if mode == "sleep":
    time.sleep(3600)
elif mode == "crash":  # exit 1 at once
    sys.exit(1)
elif mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(arg, "w").close()  # tells the test the handler is installed
    time.sleep(3600)
elif mode == "notify-when":  # READY=1 only once the file ARG exists
    open(arg + ".waiting", "w").close()
    while not os.path.exists(arg):
        time.sleep(0.02)
    notify("READY=1\nSTATUS=ready")
    time.sleep(3600)
elif mode == "notify-no-watchdog":  # ready, then never pings
    notify("READY=1")
    time.sleep(3600)
elif mode == "double-fork":  # leave an orphan that exits once ARG exists
    if os.fork() == 0:
        if os.fork() == 0:
            with open(arg + ".pid", "w") as f:
                f.write(str(os.getpid()))
            while not os.path.exists(arg):
                time.sleep(0.02)
            os._exit(0)
        os._exit(0)
    time.sleep(3600)
else:
    sys.exit(f"unknown mode {mode}")
