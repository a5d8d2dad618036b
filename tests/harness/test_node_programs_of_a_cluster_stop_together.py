"""A cluster's node programs are stopped together: every one is sent SIGTERM before any is
waited for, so stopping a cluster takes one grace period, not one per program (a 100-node
benchmark's 300 programs, stopped one after another, took minutes; tests/kit/node/stopping.py).

Each program here, once told to stop, exits cleanly only after it has seen every program of
the set told to stop; one stopped before the others were told would wait past its grace
period and be killed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.kit.node import stopping

PROGRAMS = 3
# On SIGTERM: say so, then wait (at most 10 s, past the 5 s grace) until every program said so.
SCRIPT = """
trap 'touch "$0/told-$1"
      for _ in $(seq 100); do
        [ "$(ls "$0" | grep -c told-)" -ge "$2" ] && exit 0
        sleep 0.1
      done
      exit 3' TERM
touch "$0/ready-$1"
while true; do sleep 0.1; done
"""


def test_every_program_is_told_to_stop_before_any_is_waited_for(tmp_path: Path) -> None:
    runs = [
        subprocess.Popen(
            ["bash", "-c", SCRIPT, str(tmp_path), str(n), str(PROGRAMS)],
            start_new_session=True,  # a session of its own, as a node program's
            text=True,
        )
        for n in range(PROGRAMS)
    ]
    waited = time.monotonic() + 30
    while len(list(tmp_path.glob("ready-*"))) < PROGRAMS and time.monotonic() < waited:
        time.sleep(0.05)  # each has set its trap

    stopping.stop_programs((process, None) for process in runs)

    assert [p.returncode for p in runs] == [0] * PROGRAMS  # none killed, none gave up waiting
