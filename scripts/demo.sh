#!/usr/bin/env bash
# The main job: kubectl gpu against a local simulated GPU cluster (an API server
# stand-in with simulated GPU nodes, NVIDIA device plugin and GPU Operator; see
# tests/fakes/). Against a real cluster, run the same kubectl gpu commands without
# --kubeconfig.
set -uo pipefail
cd "$(dirname "$0")/.."
if command -v kubectl >/dev/null 2>&1; then gpu=(kubectl gpu); k=(kubectl); else gpu=(kubectl-gpu); k=(); fi

work=$(mktemp -d)
cleanup() { [ -n "${sim:-}" ] && kill "$sim" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
fail() { echo "demo: $*" >&2; exit 1; }

python -m tests.fakes.cluster --kubeconfig "$work/kubeconfig" --layout gpu-operator \
  --nodes gpu-a=H100-SXM5-80GB:8,gpu-b=A100-SXM4-80GB:4,cpu-1=none:0 >"$work/sim.log" 2>&1 &
sim=$!
for _ in $(seq 100); do grep -q '^ready:' "$work/sim.log" && break; sleep 0.1; done
grep -q '^ready:' "$work/sim.log" || { cat "$work/sim.log"; fail "the simulated cluster did not start"; }
export KUBECONFIG="$work/kubeconfig"
echo "simulated cluster: GPU Operator layout, gpu-a (8x H100 80GB), gpu-b (4x A100 80GB), cpu-1"

if [ ${#k[@]} -gt 0 ]; then
  step "kubectl get nodes -o custom-columns=..."
  kubectl get nodes -o custom-columns='NAME:.metadata.name,PRODUCT:.metadata.labels.nvidia\.com/gpu\.product,GPUS:.status.allocatable.nvidia\.com/gpu'
fi

step "${gpu[*]} validate -f tests/data/device-plugin/time-slicing-configmap-gpu-operator.yaml"
"${gpu[@]}" validate -f tests/data/device-plugin/time-slicing-configmap-gpu-operator.yaml || fail "valid config rejected"

# Mistakes the upstream tools accept silently, or report only as a crash-looping plugin on the node.
for f in examples/device-plugin/invalid/both-strategies.yaml \
         examples/device-plugin/invalid/misplaced-sharing-keys-under-flags.yaml \
         examples/device-plugin/invalid/replicas-one.yaml; do
  step "${gpu[*]} validate -f $f"
  "${gpu[@]}" validate -f "$f"
  [ $? -eq 1 ] || fail "expected exit 1 for $f"
done

step "${gpu[*]} share --replicas 4 --wait --timeout 60s   # time-slice every GPU 4 ways"
"${gpu[@]}" share --replicas 4 --wait --timeout 60s || fail "share did not verify"

step "${gpu[*]} share show"
"${gpu[@]}" share show || fail "share show failed"

step "${gpu[*]} share --replicas 1   # refused before anything is written"
"${gpu[@]}" share --replicas 1
[ $? -eq 2 ] || fail "replicas 1 must be a usage error"

step "${gpu[*]} share rollback --wait --timeout 60s"
"${gpu[@]}" share rollback --wait --timeout 60s || fail "rollback failed"

if [ ${#k[@]} -gt 0 ]; then
  step "kubectl apply -f <a pod asking for 2 GPUs on an H200 node>; ${gpu[*]} doctor trainer"
  kubectl apply -f - >/dev/null <<'POD'
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
  containers:
  - {name: main, image: "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", resources: {limits: {nvidia.com/gpu: "2"}}}
POD
  sleep 1
  "${gpu[@]}" doctor trainer
  [ $? -eq 1 ] || fail "doctor should name the scheduler layer"
fi

step "${gpu[*]} doctor   # cluster GPU health"
"${gpu[@]}" doctor || fail "no error-level finding expected"

mig=tests/data/mig/mig-parted__deployments__systemd__config-default.yaml
step "${gpu[*]} mig validate -f <NVIDIA's default MIG config> -c all-balanced --node gpu-a --node gpu-b"
"${gpu[@]}" mig validate -f "$mig" -c all-balanced --node gpu-a --node gpu-b || fail "all-balanced should fit"

step "${gpu[*]} mig validate -f <NVIDIA's default MIG config> -c all-1g.5gb --node gpu-a   # an A100-40GB layout"
"${gpu[@]}" mig validate -f "$mig" -c all-1g.5gb --node gpu-a
[ $? -eq 1 ] || fail "an A100-40GB profile must not fit an H100"

step "${gpu[*]} mig plan -f <NVIDIA's default MIG config> -c all-balanced --gpu H100-80GB"
"${gpu[@]}" mig plan -f "$mig" -c all-balanced --gpu H100-80GB || fail "plan failed"

step "${gpu[*]} map --checkpoint tests/data/checkpoints/time-sliced-4x.json -o wide"
"${gpu[@]}" map --checkpoint tests/data/checkpoints/time-sliced-4x.json -o wide || fail "map failed"

echo
echo "demo: done."
