"""Regenerate the Python stubs in kubectl_gpu/_proto/ from the .proto files beside this script.

Owns: the one repeatable generation step for kubectl_gpu/_proto (protoc through grpcio-tools, then
the single import rewrite protoc cannot do for a nested package). Must not: edit generated code in
any other way, or be imported by the product.

Usage, from the repository root::

    .venv/bin/python proto/generate.py            # writes kubectl_gpu/_proto/
    .venv/bin/python proto/generate.py --out DIR  # writes DIR/ (tests compare it with the tree)

protoc writes ``from podresources.v1 import api_pb2`` into the gRPC module because it only knows
paths relative to ``-I proto``; the stubs live under ``kubectl_gpu._proto``, so that one line is
rewritten to an absolute import of the package.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
DEFAULT_OUT = REPO_ROOT / "kubectl_gpu" / "_proto"
PACKAGE = "kubectl_gpu._proto"

# (proto file relative to PROTO_ROOT, whether it declares a service and needs a gRPC module)
PROTOS: tuple[tuple[str, bool], ...] = (
    ("podresources/v1/api.proto", True),
    ("deviceplugin/v1beta1/allocate.proto", False),
)

INIT_TEXT = '"""Generated protobuf stubs ({what}); see proto/generate.py. Never edit by hand."""\n'


def run_protoc(proto: str, with_grpc: bool, out: Path) -> None:
    """Run grpcio-tools' protoc for one file, writing _pb2.py, _pb2.pyi and maybe _pb2_grpc.py."""
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out}",
        f"--pyi_out={out}",
    ]
    if with_grpc:
        command.append(f"--grpc_python_out={out}")
    command.append(str(PROTO_ROOT / proto))
    subprocess.run(command, check=True)


def rewrite_grpc_import(proto: str, out: Path) -> None:
    """Point the gRPC module's import of its messages module into our package."""
    module_dir = Path(proto).parent
    stem = Path(proto).stem
    grpc_file = out / module_dir / f"{stem}_pb2_grpc.py"
    relative_package = ".".join(module_dir.parts)
    old = f"from {relative_package} import {stem}_pb2 as "
    new = f"from {PACKAGE}.{relative_package} import {stem}_pb2 as "
    text = grpc_file.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise SystemExit(f"{grpc_file}: expected exactly one line starting {old!r}")
    grpc_file.write_text(text.replace(old, new), encoding="utf-8")


def write_init_files(out: Path) -> None:
    """Make every generated folder an importable package."""
    folders = {out}
    for proto, _ in PROTOS:
        folder = out / Path(proto).parent
        while folder != out:
            folders.add(folder)
            folder = folder.parent
    for folder in sorted(folders):
        what = "/".join(folder.relative_to(out).parts) or "root"
        (folder / "__init__.py").write_text(INIT_TEXT.format(what=what), encoding="utf-8")


def generate(out: Path) -> None:
    """Write all stubs under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for proto, with_grpc in PROTOS:
        run_protoc(proto, with_grpc, out)
        if with_grpc:
            rewrite_grpc_import(proto, out)
    write_init_files(out)


def main(argv: list[str] | None = None) -> None:
    """Parse ``--out`` and generate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    generate(parser.parse_args(argv).out)


if __name__ == "__main__":
    main()
