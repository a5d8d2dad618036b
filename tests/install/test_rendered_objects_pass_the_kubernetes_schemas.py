"""Every object `kubectl gpu install` renders, in every mode and with every option that changes
the pod specs, passes the Kubernetes OpenAPI schemas of 1.30 to 1.35 (kubernetes-validate,
strict: a field a version does not know is an error, not silently dropped)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from kubectl_gpu import bundle

VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
OPTIONS = {
    "bundle": bundle.Options(),
    "bundle-nvidia-runtime-always-pull": bundle.Options(
        runtime_class="nvidia", image_pull_policy="Always", agent_image="reg.example/a:v1"
    ),
    "operator": bundle.Options(mode="operator", runtime_class="nvidia"),
}


def _label(obj: dict[str, Any]) -> str:
    kind, namespace, name = bundle.identity(obj)
    return f"{kind}/{namespace + '/' if namespace else ''}{name}"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("options", OPTIONS.values(), ids=list(OPTIONS))
def test_every_rendered_object_is_valid_for_the_version(
    version: str, options: bundle.Options
) -> None:
    problems = []
    for obj in bundle.render(options):
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{_label(obj)}: {e.message} at {list(e.path)}")
    assert problems == []


def test_the_validator_catches_what_the_api_server_would_refuse() -> None:
    agent = next(o for o in bundle.render(bundle.Options()) if o["kind"] == "DaemonSet")
    container = agent["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["privilegd"] = True  # a typo: strict mode refuses it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(agent, "1.30", strict=True)
