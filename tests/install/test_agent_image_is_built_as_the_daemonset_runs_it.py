"""The Dockerfile builds what the agent DaemonSet runs: multi-stage, pinned base, non-root by
default, the agent's console script, and a build context that holds every file it copies."""

from __future__ import annotations

import configparser
import fnmatch
import re

from kubectl_gpu import bundle
from tests.conftest import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    return re.findall(rf"(?m)^{name}\s+(.*)$", DOCKERFILE)


def test_two_stages_on_a_base_pinned_to_an_exact_release() -> None:
    [base] = re.findall(r"(?m)^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[a-f0-9]{64})?", base)
    assert len(instructions("FROM")) == 2
    assert any("--from=build" in c for c in instructions("COPY"))


def test_the_image_runs_the_agent_as_a_non_root_user_by_default() -> None:
    [user] = instructions("USER")
    assert not user.startswith(("0", "root"))
    assert instructions("ENTRYPOINT") == ['["kubectl-gpu-agent"]']
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    scripts = config["options.entry_points"]["console_scripts"]
    assert "kubectl-gpu-agent = kubectl_gpu.agent:main" in scripts
    pod = next(o for o in bundle.render(bundle.Options()) if o["kind"] == "DaemonSet"
               and o["metadata"]["name"] == bundle.AGENT)["spec"]["template"]["spec"]  # fmt: skip
    assert pod["containers"][0]["command"] == ["kubectl-gpu-agent"]


def test_the_build_context_holds_every_file_the_dockerfile_copies() -> None:
    rules = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]  # fmt: skip

    def kept(path: str) -> bool:
        keep = True
        for rule in rules:
            negated = rule.startswith("!")
            pattern = rule.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
                keep = negated
        return keep

    copied = [src for line in instructions("COPY") if "--from" not in line
              for src in line.split()[:-1]]  # fmt: skip
    assert copied
    for source in copied:
        assert (ROOT / source).exists(), source
        assert kept(source.rstrip("/")), f"{source} is excluded by .dockerignore"
