"""A hand-written stdio server for the probe's tests: JSON-RPC lines, nothing of the SDK.

--banner           print a line that is not JSON-RPC first
--answer REVISION  answer every `initialize` with this revision (default: the one asked)
--silent-modern    never answer `server/discover` (the modern row times out)
--crash-modern     exit at `server/discover`, saying so on stderr (the modern row crashes)
--fifo PATH        write this process's pid, and a newline, into the FIFO at PATH once started
--deaf             answer nothing and ignore the end of stdin: only a signal stops it
"""

from __future__ import annotations

import argparse
import json
import signal
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--banner", action="store_true")
    parser.add_argument("--answer")
    parser.add_argument("--silent-modern", action="store_true")
    parser.add_argument("--crash-modern", action="store_true")
    parser.add_argument("--fifo")
    parser.add_argument("--deaf", action="store_true")
    args = parser.parse_args()
    if args.fifo:
        import os

        with open(args.fifo, "w") as fifo:
            fifo.write(f"{os.getpid()}\n")
    if args.deaf:
        while True:
            signal.pause()
    if args.banner:
        print("starting the raw server", flush=True)
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            requested = message["params"]["protocolVersion"]
            result = {
                "protocolVersion": args.answer or requested,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        elif method == "server/discover" and args.silent_modern:
            continue
        elif method == "server/discover" and args.crash_modern:
            sys.exit("the raw server knows no modern era")
        else:
            error = {"code": -32601, "message": f"no {method}"}
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
