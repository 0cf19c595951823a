"""The process every supervisor in the restart benchmark keeps alive: it reports its PID to
the benchmark as soon as it runs, then waits to be killed. Imports stay minimal on purpose:
the same command runs under every supervisor, so its start-up cost is common to all."""
import os
import socket
import sys
import time

s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(str(os.getpid()).encode(), sys.argv[1])
s.close()
time.sleep(86400)
