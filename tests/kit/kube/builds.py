"""The owners' programs the kit runs, as scripts/gobins.py builds them into this machine's cache
(`${KUBECTL_GPU_CACHE:-~/.cache/kubectl-gpu}/gobin/<target>-<key>/`): Kubernetes' own
binaries for each release the tests run against, etcd, KWOK, NVIDIA's device plugin, GFD and
DRA kubelet plugin, NFD's master, the NVML library.

Owns the one lookup of a built program for every floor of the kit (`built`: a target's
folder; `program`: one binary in it), and `NotBuilt`, whose one wording names what is missing,
why it cannot be built here and the command that builds it. Must not start what it finds, nor
build other than through scripts/gobins.py (whose cache key and lock keep parallel test
workers to one build per target).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
_found: dict[str, Path] = {}  # target → its cache folder, once looked up
_lock = threading.Lock()  # node sides start their programs from several threads


class NotBuilt(RuntimeError):
    """A program the kit runs is not in this machine's cache and cannot be built now."""


@functools.cache
def _gobins() -> ModuleType:
    """scripts/gobins.py, loaded once by path (a script of the repository's, not a package),
    under the name its dataclasses look their module up by."""
    loaded = sys.modules.get("gobins")
    if loaded is not None:  # loaded already (tests/differential's oracles): the same module
        return loaded
    spec = importlib.util.spec_from_file_location("gobins", ROOT / "scripts" / "gobins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gobins"] = module
    spec.loader.exec_module(module)
    return module


def built(target: str, *, quiet: bool = True) -> Path:
    """The cache folder holding what gobins' `target` builds (its binaries and data files),
    built first when the cache lacks it. `quiet=False` shows a long build's progress. Looked
    up once per process: gobins hashes the target's sources and asks Go its version."""
    with _lock:
        if target not in _found:
            gobins = _gobins()
            try:
                _found[target] = gobins.ensure(target, quiet=quiet)
            except gobins.BuildError as error:
                raise _not_built(target, str(error)) from None
        return _found[target]


def program(name: str, target: str | None = None) -> Path:
    """The path of the built program `name` (of gobins' `target`, by default the target of the
    same name), built first when the cache lacks it."""
    path = built(target or name) / name
    if not path.is_file():  # a name the target does not build
        raise _not_built(target or name, f"its build makes no {name}")
    return path


def programs(target: str, *, quiet: bool = True) -> dict[str, Path]:
    """Every binary gobins' `target` builds → its path, built first when the cache lacks it."""
    directory = built(target, quiet=quiet)
    return {name: directory / name for name in _gobins().resolve(target).binaries}


def _not_built(target: str, reason: str) -> NotBuilt:
    cache = _gobins().cache_root() / "gobin"
    return NotBuilt(
        f"{target} is not built in {cache} and cannot be built here: {reason}\n"
        f"build it once where Go and the Go module proxy are at hand: "
        f"python3 scripts/gobins.py {target}"
    )
