"""The release rewrites the vendored Kubernetes client's eager package `__init__`s (each imports
every API and model module below it) into ones that import a name on first use, so a command
through the krew archive loads only the modules it uses; every name stays reachable as before.

Checked here offline on a package written by the test in the client's shape; the archive
built from PyPI is checked in tests/test_krew_archive_runs_cluster_commands.py.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

EAGER_INIT = '''"""A client package, as OpenAPI Generator writes it."""
from __future__ import absolute_import

__version__ = "35.0.0"

from shop.client.api_client import ApiClient
from shop.client.models.v1_pod import V1Pod
from . import config
'''


@pytest.fixture(scope="module")
def release() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def package(root: Path, init: str) -> None:
    """`shop.client`: an __init__ (`init`) over modules that log their own import."""
    client = root / "shop" / "client"
    (client / "models").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("")
    (client / "__init__.py").write_text(init)
    (client / "models" / "__init__.py").write_text("")
    log = "import sys; sys.modules['shop'].loaded.append(__name__)\n"
    (root / "shop" / "__init__.py").write_text("loaded = []\n")
    (client / "api_client.py").write_text(log + "class ApiClient: pass\n")
    (client / "models" / "v1_pod.py").write_text(log + "class V1Pod: pass\n")
    (client / "config.py").write_text(log + "def load(): return 'loaded'\n")
    (client / "rest.py").write_text(log + "class RESTClient: pass\n")


def python(root: Path, code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", textwrap.dedent(code)],
        cwd=root, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_importing_the_package_imports_none_of_its_modules_until_a_name_is_used(
    release: ModuleType, tmp_path: Path
) -> None:
    package(tmp_path, release.lazy_init(EAGER_INIT, "shop.client"))

    shown = python(tmp_path, """
        import sys; sys.path.insert(0, ".")
        import shop, shop.client
        print(",".join(shop.loaded) or "-")
        from shop.client import ApiClient
        print(",".join(shop.loaded))
        print(shop.client.V1Pod.__name__, shop.client.config.load(), shop.client.__version__)
        print(",".join(shop.loaded))
    """)  # fmt: skip

    assert shown == [
        "-",
        "shop.client.api_client",
        "V1Pod", "loaded", "35.0.0",
        "shop.client.api_client,shop.client.models.v1_pod,shop.client.config",
    ]  # fmt: skip


def test_every_name_the_eager_package_had_is_still_there(
    release: ModuleType, tmp_path: Path
) -> None:
    package(tmp_path, release.lazy_init(EAGER_INIT, "shop.client"))

    shown = python(tmp_path, """
        import sys; sys.path.insert(0, ".")
        import shop.client as c
        print(all(n in dir(c) for n in ("ApiClient", "V1Pod", "config")))
        print(c.rest.RESTClient.__name__)  # a submodule, by attribute
        from shop.client import *
        print(V1Pod is c.V1Pod, ApiClient is c.api_client.ApiClient)
        try:
            c.Nothing
        except AttributeError as e:
            print(type(e).__name__)
    """)  # fmt: skip

    assert shown == ["True", "RESTClient", "True", "True", "AttributeError"]


def test_an_init_doing_more_than_importing_is_refused_naming_the_line(
    release: ModuleType,
) -> None:
    # a newer client whose __init__ runs code: rewriting it would silently drop that code
    source = EAGER_INIT + "configure_logging()\n"

    with pytest.raises(
        release.LayoutError, match=r"line 9: 'configure_logging\(\)'.*LAZY_PACKAGES"
    ):
        release.lazy_init(source, "shop.client")


def test_the_rewrite_is_the_same_text_every_time(release: ModuleType, tmp_path: Path) -> None:
    shuffled = EAGER_INIT.replace("from . import config\n", "").replace(
        "__version__", "from . import config\n__version__"
    )

    assert release.lazy_init(EAGER_INIT, "shop.client") == release.lazy_init(
        shuffled, "shop.client"
    )
    for folder in release.LAZY_PACKAGES:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text(EAGER_INIT)
    release.make_lazy(tmp_path)
    assert "_LAZY = {" in (tmp_path / "kubernetes" / "client" / "__init__.py").read_text()
