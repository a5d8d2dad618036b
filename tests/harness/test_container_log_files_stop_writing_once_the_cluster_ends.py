"""A node program's log reader may still drain its pipe after its cluster ended: once the
cluster closed its container logs, a late line writes no file and names no `Logs` object, so the
cluster's folder can go while the reader runs (a CI run failed on a reader's mkdir racing the
folder's removal, tests/kit/plane/containerlogs.py)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from tests.kit.plane.containerlogs import ContainerLogFiles


class Server:
    """Takes the `Logs` objects the log files name, as the API server would."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def request(self, method: str, path: str, body: Any, content_type: str) -> None:
        self.sent.append(f"{method} {path}")


def test_a_line_after_close_writes_nothing(tmp_path: Path) -> None:
    server = Server()
    logs = ContainerLogFiles(server, tmp_path)  # type: ignore[arg-type]
    logs.append("gpu-operator", "plugin-a", "ctr", "first line")
    assert logs.file("gpu-operator", "plugin-a", "ctr").read_text().endswith("first line\n")
    named = len(server.sent)

    logs.close()
    logs.append("gpu-operator", "plugin-b", "ctr", "a line after the end")

    assert not logs.file("gpu-operator", "plugin-b", "ctr").exists()
    assert len(server.sent) == named


def test_a_reader_writing_while_the_folder_goes_raises_nothing(tmp_path: Path) -> None:
    server = Server()
    folder = tmp_path / "logs"
    folder.mkdir()
    logs = ContainerLogFiles(server, folder)  # type: ignore[arg-type]
    failures: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        count = 0
        while not stop.is_set():
            try:
                logs.append("ns", f"pod-{count % 50}", "ctr", f"line {count}")
            except BaseException as e:  # the thread's own failure, as pytest would see it
                failures.append(e)
                return
            count += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        logs.close()
        shutil.rmtree(folder)
    finally:
        stop.set()
        thread.join()
    assert failures == []
    assert not folder.exists()  # no late write made the folder again
