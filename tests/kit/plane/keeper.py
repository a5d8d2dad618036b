"""The control plane's keeper: ends its processes when the test process that started them dies.

`ControlPlane` starts this script first, as a process of its own session, and holds the only
write end of a pipe to its stdin; it writes `keep PGID` for each component it starts (each runs in
a process group of its own), `forget PGID` once it has stopped one, and `remove DIR` for a
directory it owns. However the test process ends -- returning, an exception, SIGTERM, SIGKILL,
the OOM killer -- the kernel closes that pipe; the keeper reads end-of-file and sends SIGTERM to
every group still kept, SIGKILL to those still there after a grace period, then removes the
directories. After a normal stop nothing is kept any more (and the directories are gone).

Why not PR_SET_PDEATHSIG in a `preexec_fn`: Python's documentation says `preexec_fn` is not
safe in the presence of threads (the harness has many), and the signal follows the death of the
parent *thread*, not of the process. Stdlib only: it runs as `python -I keeper.py`.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

GRACE = 5.0


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _end(groups: set[int]) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + GRACE
    while any(map(_alive, groups)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pgid in filter(_alive, groups):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main() -> int:
    # a Ctrl-C or hang-up is the test's to handle; the keeper waits for the pipe to close
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    groups: set[int] = set()
    directories: list[str] = []
    for line in sys.stdin:
        verb, _, argument = line.rstrip("\n").partition(" ")
        if verb == "keep":
            groups.add(int(argument))
        elif verb == "forget":
            groups.discard(int(argument))
        elif verb == "remove":
            directories.append(argument)
    _end(groups)
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
