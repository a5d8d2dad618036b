"""Build the krew release: a reproducible `kubectl-gpu_vX.Y.Z.tar.gz` and its `plugin.yaml` entry.

The archive holds `kubectl-gpu` (a zipapp: python3 shebang, executable bit, the package with its
schemas and manifests, and the pure-Python dependencies of every command: click, PyYAML,
tabulate, jsonschema, protobuf, and the `kubernetes` client with everything it requires) and
`LICENSE`. The same bytes come out of every run: entries sorted, every timestamp
SOURCE_DATE_EPOCH (default 1980-01-01), uid/gid 0, fixed modes, gzip mtime 0 and no file name.
Then the sha256, uri and version in plugin.yaml are rewritten in place (comments kept).

Dependencies (`--vendor`):
  pypi  (make release; needs the network) pip fetches click, PyYAML, tabulate at the versions in
        this environment and the exact pins in PINNED: jsonschema 4.17.3 with attrs and
        pyrsistent (the last jsonschema without the compiled rpds-py), and kubernetes 35.0.0
        with its whole requirement closure (the last client without pydantic, whose core is
        compiled). Compiled accelerators (*.so) are dropped; each package left has a
        pure-Python fallback (PyYAML, charset-normalizer, protobuf's python backend).
  venv  (tests; offline) copies click, PyYAML and tabulate as installed here; jsonschema and
        kubernetes are left out, so commands that need them name the package.
  none  the package alone.
A command whose library is missing stops with the package to install.
Usage: python scripts/release.py [--vendor pypi|venv|none] [--dist DIR] [--manifest PATH]
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
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # zip cannot go before 1980
PURE = ("click", "PyYAML", "tabulate")  # whole dependency closure is pure Python
# Exact pins, so that every build vendors the same bytes; each closure resolved once with
# `pip install --report` for --python-version 3.10 (a test checks the closure is complete).
PINNED = (
    "jsonschema==4.17.3", "attrs==24.2.0", "pyrsistent==0.20.0",
    "protobuf==7.36.2",
    "kubernetes==35.0.0", "certifi==2026.10.18", "charset-normalizer==3.5.2",
    "durationpy==0.11", "idna==3.20", "oauthlib==4.0.1", "python-dateutil==3.0.0",
    "requests==2.34.2", "requests-oauthlib==2.0.0", "six==1.17.0", "tzdata==2026.6",
    "urllib3==2.8.0", "websocket-client==1.9.2",
)  # fmt: skip
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

MAIN = '''"""kubectl-gpu zipapp entry: check the interpreter, run the CLI, name missing packages."""
import sys

if sys.version_info < (3, 10):
    sys.exit("kubectl gpu needs Python 3.10 or newer; %s is %d.%d" % ((sys.executable,)
             + tuple(sys.version_info[:2])))
REQUIREMENTS = {requirements!r}
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
    (stage / "__main__.py").write_text(MAIN.format(requirements=requirements()))


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
    pins = [f"{name}=={metadata.version(name)}" for name in PURE] + list(PINNED)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", tmp, "--no-deps",
             "--only-binary=:all:", "--platform", "manylinux2014_x86_64",
             "--python-version", "3.10", "--implementation", "cp", *pins],
            check=True,
        )  # fmt: skip
        for path in sorted(Path(tmp).rglob("*")):
            relative = path.relative_to(tmp).as_posix()
            if path.is_file() and not _SKIP.search(relative):
                target = stage / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)


def write_zipapp(stage: Path, output: Path) -> None:
    """Shebang + a zip whose entries are sorted and stamped alike (zipapp's own writer stamps
    each file with its mtime)."""
    stamp = _zip_time(EPOCH)
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in stage.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(stage).as_posix(), stamp)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes(), compresslevel=9)
    output.write_bytes(buffer.getvalue())
    output.chmod(0o755)


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
        app = Path(tmp) / "kubectl-gpu"
        write_zipapp(stage, app)
        write_archive(app, ROOT / "LICENSE", archive)
    sha256 = hashlib.sha256(archive.read_bytes()).hexdigest()
    (dist / f"{archive.name}.sha256").write_text(f"{sha256}  {archive.name}\n")
    if manifest is not None:
        base = uri_base or f"{REPO}/releases/download/{version}"
        update_manifest(manifest, version, f"{base}/{archive.name}", sha256)
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vendor", choices=("pypi", "venv", "none"), default="pypi")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--manifest", type=Path, default=ROOT / "plugin.yaml")
    parser.add_argument("--no-manifest", action="store_true", help="leave plugin.yaml alone")
    parser.add_argument("--uri-base", default="", help="where the archive will be downloaded")
    args = parser.parse_args(argv)
    manifest = None if args.no_manifest else args.manifest
    archive = build(args.dist, args.vendor, manifest, args.uri_base)
    sys.stdout.write(f"{archive}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
