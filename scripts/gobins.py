#!/usr/bin/env python3
"""Build the owners' Go programs the tests run against, at pinned versions, into a cache.

Kubernetes' control plane (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl),
etcd, KWOK, krew, the config oracles built from NVIDIA's and Kubernetes' modules, and the
simulated nodes' `libnvidia-ml.so.1` (C, tests/kit/node/libnvml/c, compiled with gcc against the
nvml.h of the Go module it pins) are not committed: each is a Go module under
`tools/go/<target>/` whose go.mod pins the versions and whose go.sum is verified on every build
(`-mod=readonly`: a module whose hash differs from go.sum, or one go.sum does not list, stops
the build). The binaries land in a cache outside the clone, keyed by the target's files and the
Go version, so a fresh clone on the same machine (and CI right after a session) reuses them:

    ${KUBECTL_GPU_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kubectl-gpu}/gobin/<target>-<key>/

A build of a new key removes the target's other keys not used for STALE_DAYS (each use touches
its directory): a Kubernetes build is ~350 MB, and every pin or Go change makes a new one.

Usable alone (`python scripts/gobins.py kubernetes etcd kwok`, `--print-dir`), and imported
by the tests (`ensure("kubernetes")` returns the bin directory). Standard library only: it runs
before the virtual environment has anything in it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools" / "go"
STALE_DAYS = 14
_KEY = re.compile(r"[0-9a-f]{16}")  # cache_key's form


@dataclasses.dataclass(frozen=True)
class Target:
    """One Go module of ours under tools/go/ and what to build from it."""

    name: str
    packages: tuple[str, ...]  # import paths; each main package becomes one binary
    binaries: tuple[str, ...]  # the files the build must leave in the bin directory
    ldflags: str = "-s -w"
    cold_minutes: str = "1-2"  # measured first build on a 2-core machine, for the progress line
    rename: tuple[tuple[str, str], ...] = ()  # (built name, wanted name)
    module: str = ""  # the module's folder relative to the repository; default tools/go/<name>
    # (module path, files in it): data files that ship inside a pinned module, copied beside
    # the binaries (KWOK's stage definitions: `kwok` runs nothing without them).
    data: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cgo: bool = False  # go-nvml (under go-nvlib) is cgo-only: it loads libnvidia-ml with dlopen
    # C shared libraries compiled with gcc instead of `go build`, one per name in `binaries`:
    # (the pinned module, the path in it of the header they compile against; their stubs come
    # from that header). A name ending in .so.N is also the library's SONAME; any other gets
    # none, so that loading it does not satisfy a later dlopen of that SONAME in the process.
    c_library: tuple[str, str] | None = None

    @property
    def module_dir(self) -> Path:
        return ROOT / self.module if self.module else TOOLS / self.name


def _kubernetes(minor: str, patch: str) -> Target:
    version = f"v1.{minor}.{patch}"
    stamp = " ".join(
        f"-X {pkg}.{key}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in (("gitVersion", version), ("gitMajor", "1"), ("gitMinor", minor))
    )
    stamp += " -X k8s.io/component-base/version.gitTreeState=clean"
    commands = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    return Target(
        name=f"kubernetes-1.{minor}",
        packages=tuple(f"k8s.io/kubernetes/cmd/{c}" for c in commands),
        binaries=commands,
        ldflags=f"-s -w {stamp}",
        cold_minutes="25-35",
    )


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        _kubernetes("37", "2"),
        _kubernetes("34", "4"),
        Target(
            name="etcd",
            packages=("go.etcd.io/etcd/server/v3",),
            binaries=("etcd",),
            rename=(("v3", "etcd"), ("server", "etcd")),
            cold_minutes="3-5",
        ),
        Target(
            name="krew",
            packages=("sigs.k8s.io/krew/cmd/krew",),
            binaries=("kubectl-krew",),
            rename=(("krew", "kubectl-krew"),),
            cold_minutes="0.5-1",
        ),
        Target(
            name="device-plugin-oracle",
            packages=(".",),
            binaries=("device-plugin-oracle",),
            rename=(("device-plugin", "device-plugin-oracle"),),
            module="tests/oracles/device-plugin",
            cold_minutes="0.5-1",
        ),
        Target(
            name="mig-parted-oracle",
            packages=(".",),
            binaries=("mig-parted-oracle",),
            rename=(("mig-parted", "mig-parted-oracle"),),
            module="tests/oracles/mig-parted",
            cold_minutes="0.5-1",
            cgo=True,
        ),
        Target(
            name="dra-driver-oracle",
            packages=(".",),
            binaries=("dra-driver-oracle",),
            rename=(("dra-driver", "dra-driver-oracle"),),
            module="tests/oracles/dra-driver",
            cold_minutes="2",
        ),
        Target(
            name="cel-oracle",
            packages=(".",),
            binaries=("cel-oracle",),
            rename=(("cel", "cel-oracle"),),
            module="tests/oracles/cel",
            cold_minutes="3-4",
        ),
        # NVIDIA's device plugin at v0.19.3, the newest release the module proxy serves (v0.20.0
        # is refused there: try it again on each bump). cgo: go-nvml loads libnvidia-ml.so.1
        # with dlopen, from --driver-root (a simulated node's: docs/simulated-nvml.md).
        Target(
            name="nvidia-device-plugin",
            packages=("github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin",),
            binaries=("nvidia-device-plugin",),
            ldflags="-s -w -X github.com/NVIDIA/k8s-device-plugin/internal/info.version=v0.19.3",
            cold_minutes="2-3",
            cgo=True,
        ),
        # NVIDIA's GPU Feature Discovery: the same module and pin as the device plugin above
        # (its own go.mod under tools/go/, so the plugin's cached build keeps its key).
        Target(
            name="gpu-feature-discovery",
            packages=("github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery",),
            binaries=("gpu-feature-discovery",),
            ldflags="-s -w -X github.com/NVIDIA/k8s-device-plugin/internal/info.version=v0.19.3",
            cold_minutes="2-3",
            cgo=True,
        ),
        # Node Feature Discovery's master: turns the NodeFeature objects GFD writes (its default
        # since v0.19.0) into node labels; its CRDs ship beside it.
        Target(
            name="nfd-master",
            packages=("sigs.k8s.io/node-feature-discovery/cmd/nfd-master",),
            binaries=("nfd-master",),
            ldflags="-s -w -X sigs.k8s.io/node-feature-discovery/pkg/version.version=v0.19.0",
            cold_minutes="2-4",
            data=(
                (
                    "sigs.k8s.io/node-feature-discovery",
                    ("deployment/base/nfd-crds/nfd-api-crds.yaml",),
                ),
            ),
        ),
        # NVIDIA's DRA kubelet plugin at v0.4.1 (v0.5.0 is served but needs
        # github.com/NVIDIA/go-nvfm, which the module proxy refuses: docs/simulated-dra.md).
        # cgo for go-nvml, as the device plugin; it loads libnvidia-ml.so.1 from
        # --nvidia-driver-root (a simulated node's).
        Target(
            name="gpu-kubelet-plugin",
            packages=("sigs.k8s.io/dra-driver-nvidia-gpu/cmd/gpu-kubelet-plugin",),
            binaries=("gpu-kubelet-plugin",),
            ldflags="-s -w -X sigs.k8s.io/dra-driver-nvidia-gpu/internal/info.version=v0.4.1",
            cold_minutes="4-6",
            cgo=True,
        ),
        Target(
            name="libnvml",
            packages=(),
            # the node's library; the same without a SONAME for tests that load it in-process
            binaries=("libnvidia-ml.so.1", "libnvidia-ml-in-process.so"),
            module="tests/kit/node/libnvml/c",
            cold_minutes="0.1",
            c_library=("github.com/NVIDIA/go-nvml", "pkg/nvml/nvml.h"),
        ),
        Target(
            name="kwok",
            packages=("sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok/cmd/kwokctl"),
            binaries=("kwok", "kwokctl"),
            cold_minutes="5-8",
            data=(
                (
                    "sigs.k8s.io/kwok",
                    (
                        "kustomize/stage/node/fast/node-initialize.yaml",
                        "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
                        "kustomize/stage/pod/fast/pod-ready.yaml",
                        "kustomize/stage/pod/fast/pod-complete.yaml",
                        "kustomize/stage/pod/fast/pod-delete.yaml",
                    ),
                ),
            ),
        ),
    )
}
# Short names: `kubernetes` is the newest pinned release, the one `make test` runs against.
ALIASES = {"kubernetes": "kubernetes-1.37", "k8s": "kubernetes-1.37"}


class BuildError(Exception):
    """A build that cannot be done here; the message says what is missing and what to do."""


def cache_root() -> Path:
    explicit = os.environ.get("KUBECTL_GPU_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kubectl-gpu"


def resolve(name: str) -> Target:
    name = ALIASES.get(name, name)
    try:
        return TARGETS[name]
    except KeyError:
        known = ", ".join([*ALIASES, *TARGETS])
        raise BuildError(f"unknown target {name!r}; known: {known}") from None


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "Go is not on PATH: the real control plane and the oracles are built from Go modules "
            "(Go >= 1.26; Debian: apt-get install golang-1.26, or the official tarball)"
        )
    return go


def _go_version(go: str) -> str:
    done = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def cache_key(target: Target, go_version: str) -> str:
    """Changes when the pins, go.sum, our Go (or C) sources, the build flags, Go or the C
    compiler change."""
    digest = hashlib.sha256()
    digest.update(f"{go_version}\0{target.ldflags}\0{target.packages}\0{target.data}\0".encode())
    if target.cgo:
        digest.update(b"cgo\0")
    if target.c_library is not None:
        digest.update(f"{target.c_library}\0{_C_FLAGS}\0{_cc_version()}\0".encode())
    for path in sorted(target.module_dir.rglob("*")):
        if path.is_file() and path.suffix in {".mod", ".sum", ".go", ".c", ".h"}:
            digest.update(str(path.relative_to(target.module_dir)).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def bin_dir(target: Target, go_version: str) -> Path:
    return cache_root() / "gobin" / f"{target.name}-{cache_key(target, go_version)}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One build per target at a time (parallel test workers and a demo may ask together)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _complete(directory: Path, target: Target) -> bool:
    wanted = [*target.binaries, *(Path(f).name for _, files in target.data for f in files)]
    return all((directory / name).is_file() for name in wanted)


def ensure(name: str, *, quiet: bool = False) -> Path:
    """The directory holding `name`'s binaries, building them first if the cache lacks them."""
    target = resolve(name)
    go = _go()
    go_version = _go_version(go)
    directory = bin_dir(target, go_version)
    if _complete(directory, target):
        os.utime(directory)  # in use: not stale (see prune)
        return directory
    # not with_suffix: "kubernetes-1.37-<key>" has the suffix ".37-<key>", so every
    # Kubernetes release would share one lock
    with _locked(directory.parent / f"{directory.name}.lock"):
        if _complete(directory, target):  # another process built it while we waited
            return directory
        _build(go, target, directory, quiet=quiet)
    prune(target, keep=directory, quiet=quiet)
    return directory


def prune(
    target: Target, keep: Path, *, quiet: bool = False, now: float | None = None
) -> list[Path]:
    """Remove `target`'s other cache directories (other keys) unused for STALE_DAYS; return
    them. A directory in use by another clone is touched at each use, so it is kept."""
    cutoff = time.time() - STALE_DAYS * 86400
    removed = []
    for other in sorted(keep.parent.glob(f"{target.name}-*")):
        key = other.name[len(target.name) + 1 :]
        if other == keep or not other.is_dir() or not _KEY.fullmatch(key):
            continue  # a lock, or another target whose name extends ours
        if other.stat().st_mtime < cutoff:
            shutil.rmtree(other, ignore_errors=True)
            (other.parent / f"{other.name}.lock").unlink(missing_ok=True)
            removed.append(other)
    if removed and not quiet:
        unused = f"unused for {STALE_DAYS} days"
        _say(f"gobins: removed {len(removed)} stale build(s) of {target.name} ({unused})")
    return removed


def _build(go: str, target: Target, directory: Path, *, quiet: bool) -> None:
    if target.c_library is not None:
        _build_c_library(go, target, directory, quiet=quiet)
        return
    if not (target.module_dir / "go.sum").is_file():
        raise BuildError(f"{target.module_dir}/go.sum is missing: the pins cannot be verified")
    say = (lambda _msg: None) if quiet else _say
    say(
        f"gobins: building {target.name} ({', '.join(target.binaries)}) into {directory}; "
        f"the first build takes about {target.cold_minutes} min on 2 cores, later runs reuse it"
    )
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=directory.parent))
    env = dict(
        os.environ, CGO_ENABLED="1" if target.cgo else "0", GOFLAGS="-mod=readonly -buildvcs=false"
    )
    command = [go, "build", "-trimpath", "-ldflags", target.ldflags, "-o", f"{staging}/"]
    started = time.monotonic()
    try:
        with _heartbeat(say, target.name, started):
            done = subprocess.run(
                [*command, *target.packages],
                cwd=target.module_dir,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        if done.returncode != 0:
            raise BuildError(_explain(target, done.stderr))
        for built, wanted in target.rename:
            if (staging / built).exists() and not (staging / wanted).exists():
                (staging / built).rename(staging / wanted)
        _copy_data(go, target, env, staging)
        missing = [b for b in target.binaries if not (staging / b).is_file()]
        if missing:
            raise BuildError(f"{target.name}: the build left no {', '.join(missing)}")
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"gobins: {target.name} built in {time.monotonic() - started:.0f} s")


# -O2 and warnings as errors: the library is loaded into NVIDIA's Go binaries and the agent;
# and it is linked with -z defs, so a symbol it lacks fails the build, not the process loading it.
_C_FLAGS = (
    "-std=c11", "-D_GNU_SOURCE", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-Wl,-z,defs",
)  # fmt: skip
# Every function nvml.h declares returns nvmlReturn_t (nvmlErrorString aside, which is ours).
_NVML_FUNCTION = re.compile(r"^\s*nvmlReturn_t\s+DECLDIR\s+(nvml\w+)\s*\(", re.MULTILINE)


def _cc() -> str:
    cc = shutil.which(os.environ.get("CC", "gcc"))
    if cc is None:
        raise BuildError("gcc is not on PATH: the simulated NVML library is C (apt install gcc)")
    return cc


def _cc_version() -> str:
    done = subprocess.run([_cc(), "--version"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0] if done.stdout else "unknown"


def nvml_stubs(header: str) -> tuple[list[str], str]:
    """The NVML function names `header` declares, and C source defining each as a weak stub
    that answers NVML_ERROR_NOT_SUPPORTED (or aborts in strict mode): a binary calling any
    NVML function finds the symbol, and the library's own definitions win at link time."""
    names = sorted(set(_NVML_FUNCTION.findall(header)))
    lines = ['#include "trace.h"', ""]
    lines += [
        f'__attribute__((weak)) int {n}(void) {{ return sim_unimplemented("{n}"); }}' for n in names
    ]
    return names, "\n".join(lines) + "\n"


def _build_c_library(go: str, target: Target, directory: Path, *, quiet: bool) -> None:
    assert target.c_library is not None
    module, header_path = target.c_library
    say = (lambda _msg: None) if quiet else _say
    say(f"gobins: building {target.name} ({', '.join(target.binaries)}) into {directory}")
    started = time.monotonic()
    env = dict(os.environ, GOFLAGS="-mod=readonly -buildvcs=false")
    fetched = subprocess.run(
        [go, "mod", "download", module],
        cwd=target.module_dir, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if fetched.returncode != 0:
        raise BuildError(_explain(target, fetched.stderr))
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=directory.parent))
    try:
        _copy_module_files(go, target, env, module, (header_path,), staging)
        _names, stubs = nvml_stubs((staging / Path(header_path).name).read_text())
        (staging / "stubs.c").write_text(stubs)
        # Export NVML's names only: the library's own helpers must not meet a host's symbols.
        (staging / "exports.map").write_text("{ global: nvml*; local: *; };\n")
        sources = sorted(str(p) for p in target.module_dir.glob("*.c"))
        for output in target.binaries:
            soname = [f"-Wl,-soname,{output}"] if re.search(r"\.so\.\d+$", output) else []
            done = subprocess.run(
                [
                    _cc(), *_C_FLAGS, "-shared", f"-I{target.module_dir}", f"-I{staging}",
                    "-o", str(staging / output), *soname,
                    f"-Wl,--version-script={staging / 'exports.map'}",
                    *sources, str(staging / "stubs.c"), "-lpthread", "-lm",
                ],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise BuildError(f"cannot build {target.name}:\n{done.stderr.strip()[-3000:]}")
        for leftover in ("stubs.c", "exports.map", Path(header_path).name):
            (staging / leftover).unlink()
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"gobins: {target.name} built in {time.monotonic() - started:.1f} s")


def _say(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _copy_data(go: str, target: Target, env: dict[str, str], into: Path) -> None:
    """Copy data files from the pinned modules' directories in the module cache."""
    for module, files in target.data:
        _copy_module_files(go, target, env, module, files, into)


def _copy_module_files(  # noqa: PLR0913 - one call site, each argument a different fact
    go: str, target: Target, env: dict[str, str], module: str, files: tuple[str, ...], into: Path
) -> None:
    where = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", module],
        cwd=target.module_dir, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    source = Path(where.stdout.strip())
    if where.returncode != 0 or not source.is_dir():
        raise BuildError(f"{target.name}: cannot find {module} in the module cache: {where.stderr}")
    for name in files:
        copied = into / Path(name).name
        shutil.copyfile(source / name, copied)
        copied.chmod(0o644)


@contextlib.contextmanager
def _heartbeat(say: object, name: str, started: float) -> Iterator[None]:
    """A line every 30 s, so a build of many minutes does not look hung."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(30):
            say(f"gobins: still building {name} ({time.monotonic() - started:.0f} s)")  # type: ignore[operator]

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _explain(target: Target, stderr: str) -> str:
    tail = "\n".join(stderr.strip().splitlines()[-15:])
    if any(s in stderr for s in ("dial tcp", "no such host", "connection refused", "i/o timeout")):
        proxy = os.environ.get("GOPROXY") or "the default GOPROXY"
        return (
            f"cannot build {target.name}: the Go module proxy ({proxy}) is unreachable and the "
            f"modules are not in the module cache yet.\n{tail}"
        )
    if any(s in stderr for s in ("missing go.sum entry", "SECURITY ERROR", "checksum mismatch")):
        return f"cannot build {target.name}: a module does not match the pinned go.sum.\n{tail}"
    return f"cannot build {target.name}:\n{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help="targets to build (default: all)")
    parser.add_argument("--list", action="store_true", help="list targets and their cache paths")
    parser.add_argument("--print-dir", action="store_true", help="print each target's bin dir")
    args = parser.parse_args(argv)
    names = args.targets or list(TARGETS)
    try:
        if args.list:
            go_version = _go_version(_go())
            for name in names:
                target = resolve(name)
                directory = bin_dir(target, go_version)
                state = "built" if _complete(directory, target) else "not built"
                sys.stdout.write(f"{target.name}\t{state}\t{directory}\n")
            return 0
        for name in names:
            directory = ensure(name)
            if args.print_dir:
                sys.stdout.write(f"{directory}\n")
    except BuildError as error:
        _say(f"gobins: error: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
