"""Build the krew release: a reproducible `kubectl-gpu_vX.Y.Z.tar.gz` and its `plugin.yaml` entry.

The archive holds `kubectl-gpu` (a zipapp: python3 shebang, executable bit, two entries: the
entry MAIN and PAYLOAD, a stored zip of the package with its schemas and manifests and the
pure-Python dependencies of every command: click, PyYAML, tabulate, jsonschema, protobuf, and
the `kubernetes` client with everything it requires) and `LICENSE`. The same bytes come out
of every run: entries sorted, every timestamp SOURCE_DATE_EPOCH (default 1980-01-01), uid/gid
0, fixed modes, gzip mtime 0 and no file name.
Then the sha256, uri and version in plugin.yaml are rewritten in place (comments kept).

Dependencies (`--vendor`):
  pypi  (make release; needs the network) pip installs exactly what tools/release/vendor.lock
        names, each pinned to one version and one wheel by its sha256 (--require-hashes), so a
        fresh clone on any day vendors the same bytes: click, PyYAML, tabulate, jsonschema 4.17.3
        with attrs and pyrsistent (the last jsonschema without the compiled rpds-py), protobuf,
        and kubernetes 35.0.0 with its whole requirement closure (the last client without
        pydantic, whose core is compiled). Compiled accelerators (*.so) are dropped; each package
        left has a pure-Python fallback (PyYAML, charset-normalizer, protobuf's python backend).
        The client's package __init__s that import every module below them are rewritten to
        import a name on first use (LAZY_PACKAGES), so a command loads only what it uses.
  venv  (tests; offline) copies click, PyYAML and tabulate as installed here; jsonschema and
        kubernetes are left out, so commands that need them name the package.
  none  the package alone.
`--check` builds from the lock without writing plugin.yaml and exits 1 unless the archive's
sha256 is the one plugin.yaml records (CI runs it: a release cut from this commit must match
its own manifest).
A command whose library is missing stops with the package to install. The archive holds no
bytecode (none that every supported Python could use); at its first run it unpacks its payload
into the user's cache, where Python keeps the compiled modules (see MAIN), so the archive's bytes
stay reproducible and later commands start as fast as from a venv (docs/performance.md).
Usage: python scripts/release.py [--vendor pypi|venv|none] [--dist DIR] [--manifest PATH] [--check]
"""

from __future__ import annotations

import argparse
import configparser
import gzip
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPO = "https://github.com/kubectl-gpu/kubectl-gpu"
SHEBANG = b"#!/usr/bin/env python3\n"
PAYLOAD = "payload.zip"  # inside the zipapp, beside its entry: the package and its dependencies
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # zip cannot go before 1980
PURE = ("click", "PyYAML", "tabulate")  # what --vendor venv copies (pure Python)
LOCK = ROOT / "tools" / "release" / "vendor.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")
_HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


class LockError(ValueError):
    """vendor.lock names a dependency that could float: no exact version, or no hash."""


def locked(lock: Path = LOCK) -> dict[str, str]:
    """Distribution -> exact version, from the lock; refuses any line that is not `name==version`
    followed by at least one `--hash=sha256:…` (pip would otherwise pick what is newest)."""
    pins: dict[str, str] = {}
    entries = " ".join(
        line.split("#", 1)[0].replace("\\", " ") for line in lock.read_text().splitlines()
    ).split()
    current = None
    hashed: set[str] = set()
    for number, word in enumerate(entries):
        if word.startswith("--"):
            if current is None or not _HASH.match(word):
                raise LockError(f"{lock.name}: {word!r} is not a --hash=sha256:… of a pin")
            hashed.add(current)
            continue
        match = _PIN.match(word)
        if match is None:
            raise LockError(
                f"{lock.name}: {word!r} (entry {number + 1}) is not pinned as NAME==VERSION; "
                "a vendored dependency must not float"
            )
        current = match.group(1)
        pins[current] = match.group(2)
    unhashed = sorted(set(pins) - hashed)
    if unhashed:
        raise LockError(f"{lock.name}: no --hash=sha256 for {', '.join(unhashed)}")
    return pins


# import name -> distribution whose absence it means (for the zipapp's message)
MODULE_DISTRIBUTIONS = {
    "kubernetes": "kubernetes",
    "urllib3": "kubernetes",
    "jsonschema": "jsonschema",
    "referencing": "jsonschema",
    "rpds": "jsonschema",
    "google": "protobuf",
    "yaml": "PyYAML",
    "click": "click",
    "tabulate": "tabulate",
}
_SKIP = re.compile(r"(^|/)(__pycache__|bin)(/|$)|\.(so|pyd|pyc|dylib)$|(^|/)RECORD$")

MAIN = '''"""kubectl-gpu zipapp entry: check the interpreter, run the CLI, name missing packages.

This zip holds this file and PAYLOAD, a zip of the package and its dependencies (Python reads
a zipapp's whole directory before it runs this: two entries, not 2,000). A zip carries no
bytecode that every supported Python can use (zipimport reads one `.pyc` per module, of one
Python's magic number), so run from a zip each command would compile the Kubernetes client
from source again: 3-5 s. The payload is unpacked once into the user's cache instead, a
directory per archive file (named by its device, inode, size and times), and compiled there
once for each Python that runs it (__pycache__). Where that cannot be done (no home, a
read-only or foreign cache), the payload runs as a zip from a temporary file, slower.
"""
import sys

if sys.version_info < (3, 10):
    sys.exit("kubectl gpu needs Python 3.10 or newer; %s is %d.%d" % ((sys.executable,)
             + tuple(sys.version_info[:2])))
REQUIREMENTS = {requirements!r}
PAYLOAD = {payload!r}


def _ours(path):
    import os
    found = os.stat(path)
    return found.st_uid == os.getuid() and not found.st_mode & 0o022


def _payload(archive):
    import zipfile
    with zipfile.ZipFile(archive) as outer:
        return outer.read(PAYLOAD)


def _unpacked(archive):
    """The payload's files in the user's cache (unpacked now if needed), or None."""
    import os

    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(home):
        return None
    base = os.path.join(home, "kubectl-gpu")
    # the file's identity, not its bytes (hashing 4 MB would cost every command ~20 ms): a
    # new or rewritten archive has another inode or ctime, and gets a directory of its own
    found = os.stat(archive)
    identity = (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)
    digest = "-".join("%x" % n for n in identity)
    target = os.path.join(base, "app-" + digest)
    if os.path.isdir(target):
        if not (_ours(base) and _ours(target)):
            return None
        _compiled(target)  # for this Python, if another one unpacked it
        return target
    import shutil
    import tempfile

    os.makedirs(base, mode=0o700, exist_ok=True)
    if not _ours(base):
        return None
    staging = tempfile.mkdtemp(prefix=".unpacking-", dir=base)
    try:
        import io
        import zipfile
        with zipfile.ZipFile(io.BytesIO(_payload(archive))) as z:
            z.extractall(staging)
        os.chmod(staging, 0o700)
        _compiled(staging)
        os.rename(staging, target)  # atomic: a directory there is complete
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not os.path.isdir(target):
            raise
    for old in os.listdir(base):  # earlier versions' copies
        if old.startswith("app-") and old != "app-" + digest:
            shutil.rmtree(os.path.join(base, old), ignore_errors=True)
    return target


def _compiled(folder):
    """Python writes each module's bytecode as it first imports it, unless told not to
    (PYTHONDONTWRITEBYTECODE, common in container images): then every module is compiled once
    per Python here, the folder being the cache's own; a stamp per interpreter says it is done."""
    import os
    tag = sys.implementation.cache_tag
    if not sys.dont_write_bytecode or tag is None:
        return
    stamp = os.path.join(folder, ".compiled-%s" % tag)
    if os.path.exists(stamp):
        return
    import compileall
    compileall.compile_dir(folder, quiet=2)
    with open(stamp, "w"):
        pass


def _temporary(archive):
    """The payload as a zip file of its own (zipimport cannot read a zip inside a zip),
    removed when the command ends."""
    import atexit
    import os
    import tempfile
    data = _payload(archive)
    handle, path = tempfile.mkstemp(prefix="kubectl-gpu-", suffix=".zip")
    atexit.register(os.unlink, path)
    with os.fdopen(handle, "wb") as f:
        f.write(data)
    return path


def _from_cache(archive):
    import os
    if not os.path.exists(archive) or archive not in [os.path.abspath(p) for p in sys.path]:
        return
    if os.path.isdir(archive):  # the zipapp unzipped by hand: its payload beside this file
        found = os.path.join(archive, PAYLOAD)
    else:
        try:
            found = _unpacked(archive)
        except (OSError, ValueError, RuntimeError):
            found = None
        try:
            found = found or _temporary(archive)
        except (OSError, ValueError, RuntimeError) as e:
            sys.exit("error: cannot unpack %s into the user's cache or a temporary file: %s\\n"
                     "hint: set XDG_CACHE_HOME to a directory of your own" % (archive, e))
    sys.path[:] = [found if os.path.abspath(p) == archive else p for p in sys.path]


# kubectl_gpu reads it to word its hints for this install (e.g. cel-python alone, not the extra)
KUBECTL_GPU_ARCHIVE = __import__("os").path.dirname(__import__("os").path.abspath(__file__))
_from_cache(KUBECTL_GPU_ARCHIVE)
try:
    from kubectl_gpu.cli import main

    main()
except ModuleNotFoundError as e:
    wanted = REQUIREMENTS.get((e.name or "").partition(".")[0])
    if wanted is None:
        raise
    sys.stderr.write(
        "error: this command needs the Python package %s, which %s cannot import\\n"
        "hint: %s -m pip install --user '%s'\\n" % (wanted.split(">")[0].split("<")[0],
        sys.executable, sys.executable, wanted)
    )
    sys.exit(1)
'''


def requirements() -> dict[str, str]:
    """Import name -> the requirement line setup.cfg gives for its distribution."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = [line.strip() for line in config["options"]["install_requires"].splitlines()]
    specs = {re.split(r"[<>=!~ ]", line)[0].lower(): line for line in lines if line[:1].isalpha()}
    return {module: specs.get(dist.lower(), dist) for module, dist in MODULE_DISTRIBUTIONS.items()}


def stage_package(stage: Path) -> None:
    shutil.copytree(
        ROOT / "kubectl_gpu",
        stage / "kubectl_gpu",
        symlinks=False,  # kubectl_gpu/schemas is a link: ship the files
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"),
    )


def vendor_from_venv(stage: Path) -> None:
    for name in PURE:
        dist = metadata.distribution(name)
        for file in dist.files or ():
            if ".." in file.parts or _SKIP.search(file.as_posix()):
                continue
            target = stage / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file.locate(), target)


def vendor_from_pypi(stage: Path) -> None:
    locked()  # refuse a floating lock before pip sees it
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", tmp, "--no-deps",
             "--only-binary=:all:", "--platform", "manylinux2014_x86_64",
             "--python-version", "3.10", "--implementation", "cp",
             "--require-hashes", "-r", str(LOCK)],
            check=True,
        )  # fmt: skip
        for path in sorted(Path(tmp).rglob("*")):
            relative = path.relative_to(tmp).as_posix()
            if path.is_file() and not _SKIP.search(relative):
                target = stage / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)


# Packages of the Kubernetes client whose `__init__` imports every module below it: 790 API
# and model modules, 0.4-1 s a command, where a command needs ApiClient, Configuration, the
# exceptions and the config loader (the client >= 37 imports lazily itself; 35 is vendored).
LAZY_PACKAGES = ("kubernetes", "kubernetes/client", "kubernetes/client/api",
                 "kubernetes/client/models")  # fmt: skip
LAZY_INIT = """# Written by kubectl-gpu's scripts/release.py in place of this package's
# __init__, which imported each name below at once: here a name is imported on first use
# (PEP 562). Through __import__, as an import statement, so `python -X importtime` shows them.
import sys as _sys

{constants}
_LAZY = {table!r}
__all__ = sorted(_LAZY)


def __getattr__(name):
    module, attribute = _LAZY.get(name, (__name__ + "." + name, ""))
    try:
        __import__(module)
        found = _sys.modules[module]
    except ModuleNotFoundError as e:
        if name in _LAZY or e.name != module:
            raise
        raise AttributeError("module %r has no attribute %r" % (__name__, name)) from None
    if attribute:
        try:
            found = getattr(found, attribute)
        except AttributeError:  # `from package import submodule`
            __import__(module + "." + attribute)
            found = _sys.modules[module + "." + attribute]
    globals()[name] = found
    return found


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
"""


class LayoutError(ValueError):
    """A vendored package's __init__ no longer has the shape the lazy rewrite expects."""


def lazy_init(source: str, package: str) -> str:
    """The text of a lazy `__init__` for `package` equivalent to `source`, an eager one made only
    of a docstring, `from M import NAME` lines and constant assignments; anything else in it
    (code whose effect the rewrite would drop) is refused."""
    import ast

    tree = ast.parse(source)
    table: dict[str, tuple[str, str]] = {}
    constants = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            origin = ".".join(p for p in (base, node.module or "") if p)
            for alias in node.names:
                if alias.name == "*":
                    raise LayoutError(f"{package}/__init__.py line {node.lineno}: a star import")
                name = alias.asname or alias.name
                whole = node.module is None  # `from . import client`: the submodule itself
                table[name] = (f"{origin}.{alias.name}", "") if whole else (origin, alias.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            constants.append(ast.unparse(node))
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            raise LayoutError(
                f"{package}/__init__.py line {node.lineno}: {ast.unparse(node)[:60]!r} is neither "
                "an import nor a constant, so a lazy __init__ would drop it; "
                f"take {package.replace('.', '/')} out of LAZY_PACKAGES in scripts/release.py"
            )
    return LAZY_INIT.format(constants="\n".join(constants), table=dict(sorted(table.items())))


def make_lazy(stage: Path) -> None:
    """Rewrite each vendored package of LAZY_PACKAGES (where vendored) to import lazily."""
    for folder in LAZY_PACKAGES:
        init = stage / folder / "__init__.py"
        if init.is_file():
            init.write_text(lazy_init(init.read_text(), folder.replace("/", ".")))


def write_zipapp(stage: Path, output: Path) -> None:
    """Shebang + a zip of two entries: the entry (MAIN) and PAYLOAD, stored, a zip of the staged
    files. Python reads a zipapp's whole directory before it runs the entry, every command: two
    entries cost nothing, the payload's 2,000 some 20-60 ms. Both zips' entries are sorted and
    stamped alike (zipapp's own writer stamps each file with its mtime)."""
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as inner:
        for path in sorted(p for p in stage.rglob("*") if p.is_file()):
            _add(inner, path.relative_to(stage).as_posix(), path.read_bytes())
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w") as archive:
        _add(
            archive,
            "__main__.py",
            MAIN.format(requirements=requirements(), payload=PAYLOAD).encode(),
        )
        _add(archive, PAYLOAD, payload.getvalue(), zipfile.ZIP_STORED)
    output.write_bytes(buffer.getvalue())
    output.chmod(0o755)


def _add(
    archive: zipfile.ZipFile, name: str, data: bytes, kind: int = zipfile.ZIP_DEFLATED
) -> None:
    info = zipfile.ZipInfo(name, _zip_time(EPOCH))
    info.external_attr = 0o644 << 16
    info.compress_type = kind
    archive.writestr(info, data, compresslevel=9 if kind == zipfile.ZIP_DEFLATED else None)


def _zip_time(epoch: int) -> tuple[int, int, int, int, int, int]:
    import time

    t = time.gmtime(max(epoch, 315532800))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec - t.tm_sec % 2)


def write_archive(app: Path, license_file: Path, output: Path) -> None:
    """tar.gz with the executable and the licence; identical bytes for identical inputs."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, path, mode in (("kubectl-gpu", app, 0o755), ("LICENSE", license_file, 0o644)):
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, EPOCH
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    with (
        open(output, "wb") as f,
        gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz,
    ):
        gz.write(raw.getvalue())


def update_manifest(manifest: Path, version: str, uri: str, sha256: str) -> None:
    """Rewrite version, every platform's uri and sha256; everything else is left as written."""
    text = manifest.read_text()
    text = re.sub(r"(?m)^(  version: ).*$", rf"\g<1>{version}", text)
    text = re.sub(r"(?m)^(\s+uri: ).*$", rf"\g<1>{uri}", text)
    text = re.sub(r"(?m)^(\s+sha256: ).*$", rf'\g<1>"{sha256}"', text)
    manifest.write_text(text)


def build(dist: Path, vendor: str, manifest: Path | None, uri_base: str = "") -> Path:
    """Build the archive into `dist`, update `manifest` (if given); return the archive."""
    sys.path.insert(0, str(ROOT))
    from kubectl_gpu import __version__

    version = f"v{__version__}"
    dist.mkdir(parents=True, exist_ok=True)
    archive = dist / f"kubectl-gpu_{version}.tar.gz"
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "stage"
        stage_package(stage)
        {"pypi": vendor_from_pypi, "venv": vendor_from_venv}.get(vendor, lambda _: None)(stage)
        make_lazy(stage)
        app = Path(tmp) / "kubectl-gpu"
        write_zipapp(stage, app)
        write_archive(app, ROOT / "LICENSE", archive)
    sha256 = hashlib.sha256(archive.read_bytes()).hexdigest()
    (dist / f"{archive.name}.sha256").write_text(f"{sha256}  {archive.name}\n")
    if manifest is not None:
        base = uri_base or f"{REPO}/releases/download/{version}"
        update_manifest(manifest, version, f"{base}/{archive.name}", sha256)
    return archive


def recorded_sha256(manifest: Path) -> set[str]:
    return set(re.findall(r'(?m)^\s+sha256: "?([0-9a-f]{64})"?\s*$', manifest.read_text()))


def check(dist: Path, vendor: str, manifest: Path) -> int:
    """Build as `make release` does, leave the manifest alone, compare."""
    archive = build(dist, vendor, None)
    built = hashlib.sha256(archive.read_bytes()).hexdigest()
    recorded = recorded_sha256(manifest)
    if recorded == {built}:
        sys.stdout.write(f"{manifest.name}: sha256 {built} is the archive built from this tree\n")
        return 0
    sys.stderr.write(
        f"error: {manifest.name} records sha256 {', '.join(sorted(recorded)) or 'none'}, but the "
        f"archive built from this tree is {built}\n"
        "hint: run `make release` and commit plugin.yaml with the change\n"
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vendor", choices=("pypi", "venv", "none"), default="pypi")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--manifest", type=Path, default=ROOT / "plugin.yaml")
    parser.add_argument("--no-manifest", action="store_true", help="leave plugin.yaml alone")
    parser.add_argument("--uri-base", default="", help="where the archive will be downloaded")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 unless the archive matches plugin.yaml"
    )
    args = parser.parse_args(argv)
    if args.check:
        return check(args.dist, args.vendor, args.manifest)
    manifest = None if args.no_manifest else args.manifest
    archive = build(args.dist, args.vendor, manifest, args.uri_base)
    sys.stdout.write(f"{archive}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
