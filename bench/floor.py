"""The floor of the restart benchmark: the least a supervisor can do - wait for its one
child and fork+exec it again at once (posix_spawn), with no bookkeeping at all."""
import os
import sys

argv = sys.argv[1:]
while True:
    pid = os.posix_spawn(argv[0], argv, os.environ)
    os.waitpid(pid, 0)
