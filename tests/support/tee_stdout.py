"""Run a stdio server, keeping a copy of everything it writes on standard output.

    python tests/support/tee_stdout.py COPY COMMAND [ARGS...]

COMMAND gets this process's standard input and error; what it writes on standard output
goes on to ours (the client's pipe) and into the file COPY, down to the last byte it
writes before it exits, which is where a span exporter flushing at exit writes. Its exit
status is then written to `COPY.exit`: a test reads the copy only once that file says the
copy is whole.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    copy_path, *command = sys.argv[1:]
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert child.stdout is not None
    forward = True
    with open(copy_path, "wb") as copy:
        while chunk := child.stdout.read1(65_536):
            copy.write(chunk)
            if forward:
                try:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.buffer.flush()
                except BrokenPipeError:  # the client stopped reading: the copy goes on
                    forward = False
    status = child.wait()
    Path(f"{copy_path}.exit").write_text(str(status), encoding="ascii")
    return status


if __name__ == "__main__":
    sys.exit(main())
