"""The MPS control daemon of a simulated GPU node, as the files it leaves on the node.

NVIDIA's device plugin v0.19.3 under `sharing.mps` starts a resource's plugin only once the MPS
control daemon for that resource answers (internal/plugin/mps.go `waitForDaemon`): it runs the
driver's `nvidia-cuda-mps-control` with `CUDA_MPS_PIPE_DIRECTORY=/mps/<resource>/pipe` and
`CUDA_MPS_LOG_DIRECTORY=/mps/<resource>/log` (its MPS root mounted at /mps), writes
`get_default_active_thread_percentage` to it and wants exit status 0; otherwise it logs "Failed
to start one or more plugins. Retrying in 30s...". On a real node the chart's MPS control daemon
(cmd/mps-control-daemon) has made, under the host's MPS root (`MPS_ROOT`, /run/nvidia/mps), per
resource `pipe/` (with the daemon's `control` socket), `log/` and `.started`, and `shm/`.

A simulated node has no CUDA: `lay_out` leaves those files under `<node>/mps` for the two
resources MPS can share (`nvidia.com/gpu`, and `nvidia.com/gpu.shared` under `renameByDefault`;
MPS refuses MIG devices), as a running daemon would, and puts the driver's control client into
the node's driver root: a stand-in that answers only while the daemon's `control` entry exists
(remove it and the plugin waits, as on a node whose daemon is down). The client maps `/mps/...`
onto `<node>/mps/...` itself, because mounting the node's MPS root at `/mps` inside the sandbox
would first need a `/mps` directory created on the host's root file system.

Owns `lay_out` and `control` (the daemon's control entry of a resource). Must not: read the
plugin's config, or run anything.
"""

from __future__ import annotations

from pathlib import Path

CLIENT = "nvidia-cuda-mps-control"
CONTAINER_ROOT = "/mps"  # where the plugin's container has the host's MPS root
RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
_CLIENT = """#!/bin/sh
# nvidia-cuda-mps-control of a simulated node (test code, tests/kit/node/mps.py): the client
# side only. The daemon is up while its control entry exists in the pipe directory.
root={root}
pipe="${{CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}}"
case "$pipe" in {container}/*) pipe="$root/${{pipe#{container}/}}" ;; esac
if [ ! -e "$pipe/control" ]; then
    echo "Cannot find MPS control daemon process" >&2
    exit 1
fi
read -r command || true
case "$command" in
    get_default_active_thread_percentage) echo 100.0 ;;
esac
exit 0
"""


def lay_out(node_dir: Path, driver_bin: Path) -> Path:
    """The node's MPS root with a running daemon's files for each resource, and the client
    in `driver_bin`; the MPS root."""
    root = node_dir / "mps"
    fresh = not root.exists()  # the daemon's files are made once: a test may take one away
    (root / "shm").mkdir(parents=True, exist_ok=True)
    for resource in RESOURCES if fresh else ():
        (root / resource / "log").mkdir(parents=True, exist_ok=True)
        control(root, resource).parent.mkdir(parents=True, exist_ok=True)
        control(root, resource).touch()
        (root / resource / ".started").touch()
    driver_bin.mkdir(parents=True, exist_ok=True)
    client = driver_bin / CLIENT
    client.write_text(_CLIENT.format(root=_quoted(root), container=CONTAINER_ROOT))
    client.chmod(0o755)
    return root


def control(root: Path, resource: str) -> Path:
    """The daemon's control entry for `resource` under the MPS root `root`."""
    return root / resource / "pipe" / "control"


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"
