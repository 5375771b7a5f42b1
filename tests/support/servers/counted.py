"""`counted.py FILE SCRIPT ARGS...` (or `counted.py FILE -m MODULE ARGS...`): adds a line to
FILE as it starts, then runs SCRIPT (or MODULE) as `__main__` with ARGS: how many server
processes a probe starts, counted by the servers themselves."""

import os
import runpy
import sys
from pathlib import Path

log, target, *args = sys.argv[1:]
with open(log, "a") as starts:  # one short write to a file opened for appending: whole lines
    starts.write(f"{os.getpid()}\n")
if target == "-m":
    module, *args = args
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
else:
    sys.argv = [target, *args]
    sys.path.insert(0, str(Path(target).resolve().parent))
    runpy.run_path(target, run_name="__main__")
