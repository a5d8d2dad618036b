"""Regenerate the test-only gRPC stubs in tests/kit/node/_proto/ from the .proto beside this.

Owns: the generation step for the kubelet's device-plugin, plugin-registration and DRA services as
the simulated nodes' kubelet stand-in speaks them (protoc through grpcio-tools, as
proto/generate.py does for the product's stubs), and the import rewrites protoc cannot do for
nested packages. Must not: edit generated
code in any other way, or write into the product (its messages are imported from there).

Usage, from the repository root::

    .venv/bin/python tests/kit/node/proto/generate.py            # writes tests/kit/node/_proto/
    .venv/bin/python tests/kit/node/proto/generate.py --out DIR  # writes DIR/ (tests compare)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[3]
PRODUCT_PROTOS = REPO_ROOT / "proto"
DEFAULT_OUT = HERE.parent / "_proto"
PROTOS = (
    "deviceplugin/v1beta1/service.proto",
    "pluginregistration/v1/registration.proto",
    "dra/v1/dra.proto",
)
# protoc writes imports relative to its -I roots; the stubs live in packages
REWRITES = {
    "from deviceplugin.v1beta1 import allocate_pb2 as ": (
        "from kubectl_gpu._proto.deviceplugin.v1beta1 import allocate_pb2 as "
    ),
    "from deviceplugin.v1beta1 import service_pb2 as ": (
        "from tests.kit.node._proto.deviceplugin.v1beta1 import service_pb2 as "
    ),
    "from pluginregistration.v1 import registration_pb2 as ": (
        "from tests.kit.node._proto.pluginregistration.v1 import registration_pb2 as "
    ),
    "from dra.v1 import dra_pb2 as ": "from tests.kit.node._proto.dra.v1 import dra_pb2 as ",
}
INIT_TEXT = '"""Generated protobuf stubs ({what}); see tests/kit/node/proto/generate.py."""\n'


def generate(out: Path) -> None:
    """Write the stubs and their packages' __init__ files under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for proto in PROTOS:
        _generate(out, proto)


def _generate(out: Path, proto: str) -> None:
    command = [
        sys.executable, "-m", "grpc_tools.protoc", f"-I{HERE}", f"-I{PRODUCT_PROTOS}",
        f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}", str(HERE / proto),
    ]  # fmt: skip
    subprocess.run(command, check=True)  # noqa: S603 (fixed argv)
    stem = out / Path(proto).parent / Path(proto).stem
    for path in (Path(f"{stem}_pb2.py"), Path(f"{stem}_pb2_grpc.py"), Path(f"{stem}_pb2.pyi")):
        text = path.read_text(encoding="utf-8")
        for old, new in REWRITES.items():
            text = text.replace(old, new)
        path.write_text(text, encoding="utf-8")
    folder = stem.parent
    while folder != out.parent:
        what = "/".join(folder.relative_to(out).parts) or "root"
        (folder / "__init__.py").write_text(INIT_TEXT.format(what=what), encoding="utf-8")
        folder = folder.parent


def main(argv: list[str] | None = None) -> None:
    """Parse ``--out`` and generate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    generate(parser.parse_args(argv).out)


if __name__ == "__main__":
    main()
