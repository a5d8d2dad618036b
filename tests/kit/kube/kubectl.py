"""Running the real `kubectl` binary against a test's server, isolated from the user's setup.

Owns `KubectlRunner`: argv → completed process (never raising on a non-zero exit), a
Popen form for `--watch`, a private HOME and discovery cache per runner so that nothing
from ~/.kube or an earlier server on the same port leaks in. Must not start servers.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KubectlRunner:
    binary: str
    kubeconfig: Path
    workdir: Path  # holds the private HOME and discovery cache

    @property
    def argv(self) -> list[str]:
        cache = self.workdir / "kube-cache"
        return [self.binary, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={cache}"]

    @property
    def env(self) -> dict[str, str]:
        home = self.workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        env["HOME"] = str(home)
        return env

    def __call__(
        self, *args: str, timeout: float = 20, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.argv, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            check=False,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """Start a long-running kubectl (e.g. `get --watch`); the caller must kill it."""
        return subprocess.Popen(
            [*self.argv, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
