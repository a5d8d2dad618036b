# The node agent's image (kubectl-gpu-agent). Multi-stage: the build stage installs the
# package with its `agent` extra into a virtual environment; the runtime stage copies only
# that. NVML (libnvidia-ml) and nvidia-smi are not in the image: the NVIDIA container runtime
# mounts the host driver's (NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES in the DaemonSet).
#
# The base is pinned to an exact release; pin it by digest too when publishing
# (docker buildx imagetools inspect python:3.11.11-slim-bookworm).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/kubectl-gpu
# Dependencies first, so that a code change does not refetch them.
COPY setup.cfg pyproject.toml README.md LICENSE ./
COPY schemas/ schemas/
COPY kubectl_gpu/ kubectl_gpu/
RUN /opt/kubectl-gpu/bin/pip install ".[agent]" \
 && /opt/kubectl-gpu/bin/python -m compileall -q /opt/kubectl-gpu

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kubectl-gpu-agent" \
      org.opencontainers.image.source="https://github.com/kubectl-gpu/kubectl-gpu" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/kubectl-gpu /opt/kubectl-gpu
COPY LICENSE /usr/share/doc/kubectl-gpu/LICENSE
# Bytecode was compiled at build time: the DaemonSet runs with a read-only root filesystem.
ENV PATH=/opt/kubectl-gpu/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Non-root by default. The agent's DaemonSet runs it as root (runAsUser: 0) and privileged, as
# NVIDIA's MIG manager runs (MIG changes need the /dev/nvidia-caps nodes, docs/rbac.md);
# read-only uses need neither. Pushed by .github/workflows/release.yaml for amd64 and arm64.
RUN useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin kubectl-gpu
USER 65532:65532
ENTRYPOINT ["kubectl-gpu-agent"]
