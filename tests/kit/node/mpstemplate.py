"""The MPS control-daemon template NVIDIA's DRA kubelet plugin reads when it prepares an MPS claim.

`gpu-kubelet-plugin` v0.4.1 with `MPSSupport=true` renders, for each MPS claim it prepares, the
file at the hard-coded path `/templates/mps-control-daemon.tmpl.yaml` (a file of the driver's
image) as a Go `text/template` over its `MpsControlDaemonTemplateData`, decodes the result as
one `apps/v1` Deployment, creates it in the plugin's namespace and waits until the Deployment
has one ready replica whose pod (found by `spec.selector.matchLabels`) has exactly one container,
ready (cmd/gpu-kubelet-plugin/sharing.go, `MpsControlDaemon.Start` and `AssertReady`:
https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/v0.4.1/cmd/gpu-kubelet-plugin/sharing.go).
A field the template names that the data lacks fails the claim's prepare.

This module writes the project's own template from those facts: the data's fields it uses are
`NodeName` (the pod is bound to the claim's node: no scheduling), `MpsControlDaemonNamespace`,
`MpsControlDaemonName` (`mps-control-daemon-<claim UID>-<5 hex digits of the devices' hash>`,
also the pod's `app` label the selector matches), `MpsImageName` (`--image-name`),
`ServiceAccountName` (`--service-account-name`; empty means the namespace's default),
`CUDA_VISIBLE_DEVICES` (the claim's GPU UUIDs, comma-separated), `DefaultActiveThreadPercentage`
(empty unless the claim's `mpsConfig` sets it), `DefaultPinnedDeviceMemoryLimits` (GPU UUID →
limit in whole megabytes, `<n>M`), `NvidiaDriverRoot` (the host's driver root), and the host
directories the plugin made for the daemon under `<kubelet plugins dir>/gpu.nvidia.com/mps/<id>/`:
`MpsShmDirectory` (the tmpfs it mounted), `MpsPipeDirectory` and `MpsLogDirectory`, with
`MpsShmMountPath` (where the shm directory goes in the container). The daemon's commands are the
control interface of NVIDIA's `nvidia-cuda-mps-control` (`-d` starts the daemon; the
`set_default_active_thread_percentage <percent>` and `set_default_device_pinned_mem_limit <device>
<limit>` commands on its standard input: https://docs.nvidia.com/deploy/mps/). The template is
written as JSON, which the plugin's YAML decoder reads as YAML.

On a simulated node no container runs (KWOK plays the pod's life), so the command is what a real
node would run, and the pod is Ready once KWOK reports it so. Owns `write` and `FILE`. Must not:
render the template (NVIDIA's binary does) or create the Deployment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DIRECTORY = "/templates"  # where the plugin looks, inside its own file system
FILE = "mps-control-daemon.tmpl.yaml"
CONTAINER = "mps-control-daemon"
DRIVER_ROOT = "/driver-root"  # the host's driver root inside the daemon's container
PIPE, LOG = "/driver-root/tmp/nvidia-mps", "/driver-root/var/log/nvidia-mps"
STARTED = f"{LOG}/started"  # written once the daemon took its settings: the startup probe

_NAME = "{{ .MpsControlDaemonName }}"
# The daemon, then one control command per setting the claim made; `started` marks it up.
_SCRIPT = "\n".join(
    [
        "set -e",
        f'export PATH="{DRIVER_ROOT}/usr/bin:{DRIVER_ROOT}/bin:$PATH"',
        f'export LD_LIBRARY_PATH="{DRIVER_ROOT}/usr/lib/x86_64-linux-gnu:{DRIVER_ROOT}/usr/lib64"',
        f"rm -f {STARTED}",
        "nvidia-cuda-mps-control -d",
        "{{ if .DefaultActiveThreadPercentage }}echo set_default_active_thread_percentage"
        " {{ .DefaultActiveThreadPercentage }} | nvidia-cuda-mps-control{{ end }}",
        "{{ range $gpu, $limit := .DefaultPinnedDeviceMemoryLimits }}"
        "echo set_default_device_pinned_mem_limit {{ $gpu }} {{ $limit }} | nvidia-cuda-mps-control"
        "\n{{ end }}",
        f"touch {STARTED}",
        f"exec tail -n +1 -f {LOG}/control.log",
    ]
)


def _host_path(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path}}


def deployment() -> dict[str, Any]:
    """The Deployment, with the plugin's template actions where its data goes."""
    labels = {"app": _NAME}
    container = {
        "name": CONTAINER,
        "image": "{{ .MpsImageName }}",
        "securityContext": {"privileged": True},  # the daemon reaches the GPUs' device nodes
        "command": ["sh", "-c", _SCRIPT],
        "env": [
            {"name": "CUDA_VISIBLE_DEVICES", "value": "{{ .CUDA_VISIBLE_DEVICES }}"},
            {"name": "CUDA_MPS_PIPE_DIRECTORY", "value": PIPE},
            {"name": "CUDA_MPS_LOG_DIRECTORY", "value": LOG},
        ],
        "startupProbe": {"exec": {"command": ["cat", STARTED]}, "periodSeconds": 1},
        "volumeMounts": [
            {"name": "driver-root", "mountPath": DRIVER_ROOT},
            {"name": "mps-shm", "mountPath": "{{ .MpsShmMountPath }}"},
            {"name": "mps-pipe", "mountPath": PIPE},
            {"name": "mps-log", "mountPath": LOG},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"namespace": "{{ .MpsControlDaemonNamespace }}", "name": _NAME,
                     "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeName": "{{ .NodeName }}",
                    "serviceAccountName": "{{ .ServiceAccountName }}",
                    "hostPID": True,  # MPS clients of every pod on the node reach the daemon
                    "containers": [container],
                    "volumes": [
                        _host_path("driver-root", "{{ .NvidiaDriverRoot }}"),
                        _host_path("mps-shm", "{{ .MpsShmDirectory }}"),
                        _host_path("mps-pipe", "{{ .MpsPipeDirectory }}"),
                        _host_path("mps-log", "{{ .MpsLogDirectory }}"),
                    ],
                },
            },
        },
    }  # fmt: skip


def write(directory: Path) -> Path:
    """The template file in `directory` (what the node's sandbox shows at /templates)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE
    path.write_text(json.dumps(deployment(), indent=2) + "\n", encoding="utf-8")
    return path
