"""A FailedCreate naming a quota is explained with that quota's current numbers."""

from __future__ import annotations

from kubectl_gpu.doctor import admission, facts

KEY = "requests.nvidia.com/gpu"
MESSAGE = (
    'Error creating: pods "train-7d9f" is forbidden: exceeded quota: gpus, requested: '
    f"{KEY}=2, used: {KEY}=3, limited: {KEY}=4"
)
EVENT = facts.Event("FailedCreate", MESSAGE, "Warning", "replicaset-controller", 3)


def test_the_named_quota_is_shown_as_it_is_now() -> None:
    other = facts.Quota("cpus", {"requests.cpu": "8"}, {"requests.cpu": "2"})
    gpus = facts.Quota("gpus", {KEY: "4"}, {KEY: "3"})
    [found] = admission.missing_pod("ml", "train-7d9f", [EVENT], [other, gpus])
    assert found.evidence == (
        f"FailedCreate: {MESSAGE}",
        f"ResourceQuota gpus now: {KEY} used 3 of 4",
    )
    assert "kubectl edit resourcequota gpus" in found.fix


def test_a_refusal_that_is_not_a_quota_points_at_the_template() -> None:
    message = 'Error creating: pods "train-7d9f" is forbidden: error looking up service account'
    event = facts.Event("FailedCreate", message, "Warning", "replicaset-controller", 1)
    [found] = admission.missing_pod("ml", "train-7d9f", [event], [])
    assert found.message == "the API server refuses to create the pod"
    assert found.fix == "fix the pod template as the message says"
