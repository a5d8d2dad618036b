#!/usr/bin/env bash
# The main job: the whole kubectl-gpu story against a local GPU cluster whose control plane is
# Kubernetes' own (kube-apiserver, etcd, controller-manager, scheduler, built by
# scripts/gobins.py) with KWOK nodes; the node side is simulated (NVML at the C ABI, the kubelet's
# files, device-plugin and DRA gRPC), the DRA node runs NVIDIA's own gpu-kubelet-plugin v0.4.1,
# and once installed each GPU node runs the real kubectl-gpu-agent and NVIDIA's own
# nvidia-device-plugin v0.19.3, unmodified, as processes of their own (see tests/kit/,
# docs/architecture.md, docs/simulated-node.md, docs/simulated-dra.md). Every step is checked:
# the demo exits non-zero if one does not do what it says. Against a real cluster, run the same
# kubectl gpu commands with your own kubeconfig.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v kubectl >/dev/null 2>&1 || { echo "demo: needs kubectl on PATH" >&2; exit 1; }
gpu=(kubectl gpu)
started=$SECONDS

work=$(mktemp -d)
cleanup() { [ -n "${sim:-}" ] && kill "$sim" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
fail() { echo "demo: FAILED: $*" >&2; exit 1; }
ok() { printf '\033[32mok:\033[0m %s\n' "$*"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# until SECONDS COMMAND…: retry a check while the agents catch up (they report every 0.5 s here)
until_ok() { local t=$1; shift; for _ in $(seq $((t * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done; "$@"; }

# ours PID: whether PID runs below this demo's simulated cluster (other clusters on the machine,
# tests beside the demo, may run NVIDIA's programs for nodes of the same names).
ours() {
  local p=$1
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    [ "$p" = "$sim" ] && return 0
    p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
  done
  return 1
}

# nvidia_allocated NODE POD…: each pod's device IDs in the map against what the node's kubelet
# checkpointed from NVIDIA's Allocate (the IDs, and NVIDIA's own answer, NVIDIA_VISIBLE_DEVICES).
nvidia_allocated() {
  local node=$1; shift
  "${gpu[@]}" map "$node" -o json | python3 -c '
import base64, json, sys
from kubectl_gpu._proto.deviceplugin.v1beta1 import allocate_pb2
rows = json.load(sys.stdin)["items"]
checkpoint = json.load(open(sys.argv[1]))["Data"].get("PodDeviceEntries") or []
ok = True
line = "%-10s %-48s %s"
print(line % ("POD", "DEVICE-ID (map)", "NVIDIA_VISIBLE_DEVICES (NVIDIA Allocate, checkpoint)"))
for pod in sys.argv[2:]:
    shown = {r["device_id"] for r in rows if r["pod"] == pod}
    uids = {r["pod_uid"] for r in rows if r["pod"] == pod}
    entries = [e for e in checkpoint if e["PodUID"] in uids]
    held = {i for e in entries for ids in e["DeviceIDs"].values() for i in ids}
    visible = {dict(allocate_pb2.ContainerAllocateResponse.FromString(
        base64.b64decode(e["AllocResp"])).envs).get("NVIDIA_VISIBLE_DEVICES") for e in entries}
    physical = {r["mig_uuid"] or r["gpu_uuid"] for r in rows if r["pod"] == pod}
    ok = ok and bool(shown) and shown == held and visible == physical
    print(line % (pod, ",".join(sorted(shown)) or "-", ",".join(sorted(map(str, visible))) or "-"))
sys.exit(0 if ok else 1)
' "$node_dirs/$node/kubelet/device-plugins/kubelet_internal_checkpoint" "$@"
}

python -m tests.kit.cluster --real --kubeconfig "$work/kubeconfig" --layout none \
  --nodes gpu-a=H100-SXM5-80GB:2,gpu-b=A100-SXM4-80GB:2,cpu-1=none:0 \
  --dra-nodes dra-a=A100-SXM4-80GB:2 >"$work/sim.log" 2>&1 &
sim=$!
for _ in $(seq 600); do grep -q '^ready:' "$work/sim.log" && break; sleep 0.1; done
grep -q '^ready:' "$work/sim.log" || { cat "$work/sim.log"; fail "the cluster did not start"; }
export KUBECONFIG="$work/kubeconfig"
echo "cluster: gpu-a (2x H100 80GB), gpu-b (2x A100 80GB) with no device plugin yet (install"
echo "         brings NVIDIA's own, run in each node's sandbox behind a kubelet stand-in),"
echo "         dra-a (2x A100 80GB through NVIDIA's DRA kubelet plugin), cpu-1"

# The DRA node's process is NVIDIA's own gpu-kubelet-plugin v0.4.1, unmodified, in the node's
# sandbox with the node's libnvidia-ml.so.1 loaded; the ResourceSlice is its own.
dra_pid=""
for pid in $(pgrep -f gpu-kubelet-plugin); do
  [ "$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)")" = gpu-kubelet-plugin ] && ours "$pid" || continue
  tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qx -- '--node-name=dra-a' && dra_pid=$pid
done
[ -n "$dra_pid" ] || fail "no gpu-kubelet-plugin process for dra-a"
step "ps -o pid=,args= -p <NVIDIA's DRA kubelet plugin on dra-a>"
ps -o pid=,args= -p "$dra_pid" | sed 's/ --kubeconfig=[^ ]*//'
grep -m1 -o '/[^ ]*libnvidia-ml[^ ]*' "/proc/$dra_pid/maps" || fail "NVIDIA's DRA plugin has no libnvidia-ml loaded"
# its binary as started (argv[0], a host path): /proc/PID/exe reads through the sandbox's root on
# some kernels (6.18 here: /tmp/sim…/dra-a/root/root/.cache/…), a path that does not exist
"$(tr '\0' '\n' <"/proc/$dra_pid/cmdline" | head -1)" --version | grep -q 'v0.4.1' \
  || fail "the DRA plugin is not v0.4.1"
step "kubectl get resourceslices -o custom-columns=…   # published by NVIDIA's plugin itself"
kubectl get resourceslices -o custom-columns='NAME:.metadata.name,NODE:.spec.nodeName,DRIVER:.spec.driver,DEVICES:.spec.devices[*].name,UUIDS:.spec.devices[*].attributes.uuid.string'
kubectl get resourceslices -o json | json "sorted(d['name'] for s in d['items'] for d in s['spec'].get('devices', []) if s['spec']['nodeName'] == 'dra-a' and d['attributes']['type']['string'] == 'gpu' and d['attributes'].get('driverVersion'))" | grep -q "'gpu-0', 'gpu-1'" \
  || fail "dra-a's ResourceSlice does not list NVIDIA's gpu-0 and gpu-1"
ok "NVIDIA's gpu-kubelet-plugin v0.4.1 runs on dra-a over the node's libnvidia-ml.so.1 and published its slice"

step "kubectl version"
kubectl version || fail "the API server does not answer"
want=${KUBECTL_GPU_CONTROL_PLANE:-1.37}
kubectl version -o json | json "d['serverVersion']['gitVersion']" | grep -q "^v$want\." \
  || fail "the server is not Kubernetes $want"
ok "Kubernetes' own control plane, v$want"

step "kubectl get nodes -o custom-columns=NAME:…,GPUS:…"
kubectl get nodes -o custom-columns='NAME:.metadata.name,PRESENT:.metadata.labels.nvidia\.com/gpu\.present,GPUS:.status.allocatable.nvidia\.com/gpu'

# 1. Catch mistakes before they reach a node.
step "${gpu[*]} validate -f examples/device-plugin/invalid/replicas-one.yaml"
"${gpu[@]}" validate -f examples/device-plugin/invalid/replicas-one.yaml
[ $? -eq 1 ] || fail "an invalid config must exit 1"
ok "refused before any node saw it"

# 2. Install: NVIDIA's device plugin (config per node) and our agent on every GPU node.
step "${gpu[*]} install"
"${gpu[@]}" install || fail "install failed"
step "${gpu[*]} status"
until_ok 30 "${gpu[@]}" status || fail "status is not all green"
ok "every part ready, and an agent reporting from each GPU node"
# The installed kubectl-gpu-agent entry point, unmodified, with the node's libnvidia-ml.so.1
# (the project's NVML library at the C ABI, docs/simulated-nvml.md) loaded as on a real node.
agent_pid=""
for pid in $(pgrep -f 'bin/kubectl-gpu-agent '); do ours "$pid" && agent_pid=$pid; done
[ -n "$agent_pid" ] || fail "no kubectl-gpu-agent process"
ps -o pid=,args= -p "$agent_pid" | sed 's/ --kubeconfig .*//'
grep -m1 -o '/[^ ]*libnvidia-ml[^ ]*' "/proc/$agent_pid/maps" || fail "the agent has no libnvidia-ml loaded"
# The device plugin pod's process is NVIDIA's own nvidia-device-plugin v0.19.3, unmodified, in the
# node's sandbox (docs/simulated-node.md): its log is its own, and it loads the same library.
plugin_a=$(kubectl get pods -n kubectl-gpu -l app.kubernetes.io/name=kubectl-gpu-device-plugin \
  --field-selector spec.nodeName=gpu-a -o name)
[ -n "$plugin_a" ] || fail "no device plugin pod on gpu-a"
step "kubectl logs -n kubectl-gpu ${plugin_a#pod/} -c nvidia-device-plugin-ctr | grep -e 'Starting NVIDIA' -e Registered"
plugin_log_ok() {
  kubectl logs -n kubectl-gpu "$plugin_a" -c nvidia-device-plugin-ctr >"$work/plugin.log" 2>&1 \
    && grep -q '"Starting NVIDIA Device Plugin" version="v0.19.3"' "$work/plugin.log" \
    && grep -q 'Registered device plugin for' "$work/plugin.log"
}
until_ok 30 plugin_log_ok || { cat "$work/plugin.log"; fail "the plugin pod's log is not NVIDIA's v0.19.3 registering"; }
grep -e 'Starting NVIDIA Device Plugin' -e 'Registered device plugin for' "$work/plugin.log"
# NVIDIA's process for gpu-a: its executable is the built binary and its NODE_NAME is gpu-a.
nvidia_pid=""
for pid in $(pgrep -f nvidia-device-plugin); do
  [ "$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)")" = nvidia-device-plugin ] && ours "$pid" || continue
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'NODE_NAME=gpu-a' && nvidia_pid=$pid
done
[ -n "$nvidia_pid" ] || fail "no nvidia-device-plugin process for gpu-a"
# the simulated nodes' directories: gpu-a's driver root is <nodes>/gpu-a/driver
node_dirs=$(tr '\0' '\n' <"/proc/$nvidia_pid/cmdline" | sed -n 's|^--driver-root=\(.*\)/gpu-a/driver$|\1|p')
[ -d "$node_dirs/gpu-a/kubelet" ] || fail "no kubelet root for gpu-a under '$node_dirs'"
ps -o pid=,args= -p "$nvidia_pid"
grep -m1 -o '/[^ ]*libnvidia-ml[^ ]*' "/proc/$nvidia_pid/maps" \
  || fail "NVIDIA's device plugin has no libnvidia-ml loaded"
ok "NVIDIA's own device plugin serves gpu-a, with the node's libnvidia-ml.so.1 loaded"

# 3. Share every GPU four ways; capacity is proven, not assumed.
step "${gpu[*]} share --replicas 4 --wait --timeout 60s"
"${gpu[@]}" share --replicas 4 --wait --timeout 60s || fail "share did not verify"
[ "$(kubectl get node gpu-a -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ] || fail "gpu-a should advertise 2 x 4"

step "kubectl apply -f <3 inference pods, 1 nvidia.com/gpu each, on gpu-a, using 4, 12 and 30 GiB>"
# sim.kubectl-gpu.io/* tells the simulated node what the pod's CUDA process uses (test-only).
use=([1]="4Gi 15" [2]="12Gi 40" [3]="30Gi 70")
for i in 1 2 3; do
  read -r memory sm <<<"${use[$i]}"
  kubectl apply -f - <<POD || fail "pod infer-$i"
apiVersion: v1
kind: Pod
metadata:
  name: infer-$i
  namespace: default
  annotations: {sim.kubectl-gpu.io/gpu-memory: "$memory", sim.kubectl-gpu.io/sm-percent: "$sm"}
spec:
  nodeSelector: {kubernetes.io/hostname: gpu-a}
  containers:
  - {name: server, image: "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", resources: {limits: {nvidia.com/gpu: "1"}}}
POD
done
kubectl wait --for=jsonpath='{.status.phase}'=Running pod/infer-1 pod/infer-2 pod/infer-3 --timeout=30s >/dev/null || fail "pods not running"

step "${gpu[*]} map -A   # physical GPU → time-slice replica → pod"
has_replica_rows() { "${gpu[@]}" map -A -o json | json "sum(1 for r in d['items'] if r['replica'] is not None and r['pod']) >= 3" | grep -q True; }
until_ok 20 has_replica_rows || fail "the map does not show the three pods on GPU-…::N replicas"
"${gpu[@]}" map -A
ok "each pod on a GPU-…::N replica of a physical GPU, by namespace/name"
step "${gpu[*]} map gpu-a -o json, against gpu-a's kubelet checkpoint   # what NVIDIA's Allocate handed out"
until_ok 20 nvidia_allocated gpu-a infer-1 infer-2 infer-3 \
  || fail "the map's replicas are not what NVIDIA's Allocate handed out"
nvidia_allocated gpu-a infer-1 infer-2 infer-3
ok "the map's IDs are NVIDIA's Allocate's; its answer exposes the physical GPU behind each replica"

step "${gpu[*]} top node/gpu-a   # what each pod uses, read now from the agent through the pod proxy"
# Three pods on two GPUs: at least two share one, each with its own memory, and nothing but
# the replica count between them (time-slicing has no memory isolation).
top_ok() { "${gpu[@]}" top node/gpu-a -o json | json "
len({r['pod'] for r in d['items'] if r['kind'] == 'pod' and (r['pod'] or '').startswith('infer-')}) == 3
and any(len({r['memoryUsedBytes'] for r in d['items'] if r['kind'] == 'pod' and r['gpuUUID'] == u}) == 2
        for u in {r['gpuUUID'] for r in d['items']})
and all(r['isolation'] == 'none' for r in d['items'] if r['kind'] == 'pod')
and d['source']['kind'] == 'agent'" | grep -q True; }
until_ok 30 top_ok || fail "top does not show the three pods' own memory with no isolation"
"${gpu[@]}" top node/gpu-a
ok "each pod's own memory and SM %, two on one GPU with no isolation between them"
step "${gpu[*]} top node/gpu-a --tree   # node → GPU → replica → pod, with use and what is free"
"${gpu[@]}" top node/gpu-a --tree | tee "$work/tree.txt" || fail "top --tree failed"
grep -q -- '-- ::[0-9] free' "$work/tree.txt" || fail "the tree marks no free replica"
ok "the replicas no pod holds are marked free"

# 4. MIG: checked offline against the A100's geometry, applied by the agent through NVML.
mig=tests/data/mig/mig-parted__deployments__systemd__config-default.yaml
plugin_pod() { kubectl get pods -n kubectl-gpu -l app.kubernetes.io/name=kubectl-gpu-device-plugin \
  --field-selector "spec.nodeName=$1,status.phase=Running" -o name; }
plugin_b_before=$(plugin_pod gpu-b)
step "${gpu[*]} mig validate -f <NVIDIA's default MIG config> -c all-balanced --node gpu-b"
"${gpu[@]}" mig validate -f "$mig" -c all-balanced --node gpu-b || fail "all-balanced should fit an A100-80GB"
step "${gpu[*]} mig apply -f <NVIDIA's default MIG config> -c all-balanced --node gpu-b --wait --timeout 90s"
"${gpu[@]}" mig apply -f "$mig" -c all-balanced --node gpu-b --wait --timeout 90s -o wide | tee "$work/apply.txt"
grep -Eq '^gpu-b .* success' "$work/apply.txt" || fail "mig apply did not end in success"
ok "MIG applied by the agent on gpu-b, device plugin restarted, nvidia.com/mig-* verified"
agent_b=$(kubectl get pods -n kubectl-gpu -l app.kubernetes.io/name=kubectl-gpu-agent --field-selector spec.nodeName=gpu-b -o name)
step "kubectl logs -n kubectl-gpu ${agent_b#pod/} --tail 4   # what the agent did"
kubectl logs -n kubectl-gpu "$agent_b" --tail 4 || fail "no logs of the agent pod on gpu-b"
kubectl logs -n kubectl-gpu "$agent_b" >"$work/agent.log" || fail "no logs of the agent pod on gpu-b"
grep -q 'node gpu-b: configure (desired all-balanced' "$work/agent.log" \
  || { cat "$work/agent.log"; fail "the agent log on gpu-b does not say it configured all-balanced"; }
plugin_b=$(plugin_pod gpu-b)
[ -n "$plugin_b" ] && [ "$plugin_b" != "$plugin_b_before" ] || fail "the device plugin pod on gpu-b was not restarted"
step "kubectl logs -n kubectl-gpu ${plugin_b#pod/} -c nvidia-device-plugin-ctr | grep Registered"
mig_registered() {
  kubectl logs -n kubectl-gpu "$plugin_b" -c nvidia-device-plugin-ctr >"$work/plugin-b.log" 2>&1 \
    && grep -q "Registered device plugin for 'nvidia.com/mig-1g.10gb'" "$work/plugin-b.log"
}
until_ok 30 mig_registered || { cat "$work/plugin-b.log"; fail "NVIDIA's plugin on gpu-b did not register the MIG resources"; }
grep 'Registered device plugin for' "$work/plugin-b.log"
ok "NVIDIA's process restarted on gpu-b and serves the MIG devices"

step "kubectl apply -f <a notebook pod asking for nvidia.com/mig-1g.10gb>"
kubectl apply -f - <<'POD' || fail "pod notebook"
apiVersion: v1
kind: Pod
metadata: {name: notebook, namespace: default, annotations: {sim.kubectl-gpu.io/gpu-memory: "6Gi"}}
spec:
  containers:
  - {name: jupyter, image: "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", resources: {limits: {nvidia.com/mig-1g.10gb: "1"}}}
POD
kubectl wait --for=jsonpath='{.status.phase}'=Running pod/notebook --timeout=30s >/dev/null || fail "notebook not running"
step "${gpu[*]} map gpu-b -o wide   # MIG device → parent GPU, profile, placement → pod"
has_mig_row() { "${gpu[@]}" map gpu-b -o json | json "any(r['mig_uuid'] and r['pod'] == 'notebook' for r in d['items'])" | grep -q True; }
until_ok 20 has_mig_row || fail "the map does not show the notebook on a MIG device"
"${gpu[@]}" map gpu-b -o wide
ok "the notebook holds a MIG-… device, shown under its parent GPU"
step "${gpu[*]} map gpu-b -o json, against gpu-b's kubelet checkpoint   # the MIG device NVIDIA's Allocate handed out"
until_ok 20 nvidia_allocated gpu-b notebook \
  || fail "the notebook's MIG device is not what NVIDIA's Allocate handed out"
nvidia_allocated gpu-b notebook
ok "the MIG device NVIDIA's plugin handed out (its Allocate's answer names that MIG-…)"
step "${gpu[*]} map gpu-b --tree   # MIG devices in placement order, the free ones marked"
"${gpu[@]}" map gpu-b --tree | tee "$work/map-tree.txt" || fail "map --tree failed"
grep -q 'default/notebook' "$work/map-tree.txt" && grep -q ' free$' "$work/map-tree.txt" \
  || fail "the map tree does not show the notebook and the free MIG devices"
ok "each MIG device at its placement, held by the notebook or free"
step "${gpu[*]} top pod notebook   # its use against the MIG instance that holds it"
mig_top_ok() { "${gpu[@]}" top pod notebook -o json | json "
any(r['pod'] == 'notebook' and r['isolation'] == 'mig' and r['memoryUsedBytes'] == 6 * 2**30
    and r['memoryLimitBytes'] and r['memoryLimitBytes'] > 6 * 2**30 and r['smUnavailable'] == 'mig'
    for r in d['items'])" | grep -q True; }
until_ok 30 mig_top_ok || fail "top does not show the notebook's use against its MIG instance"
"${gpu[@]}" top pod notebook 2>&1 | tee "$work/top-pod.txt"
grep -q "on 1 node," "$work/top-pod.txt" || fail "top pod asked more than the pod's node"
ok "6 GiB used of the 1g.10gb instance; no SM figure on MIG (NVML has none per process there)"

# 5. DRA: a claim the real scheduler allocates from NVIDIA's ResourceSlice, prepared by NVIDIA's plugin.
step "kubectl apply -f <a ResourceClaimTemplate for one gpu.nvidia.com device, and a pod using it (9 GiB)>"
kubectl apply -f - <<'DRA' || fail "claim template and pod"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer-dra, namespace: default, annotations: {sim.kubectl-gpu.io/gpu-memory: "9Gi"}}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-gpu}
  containers:
  - name: main
    image: "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
    resources: {claims: [{name: gpu}]}
DRA
kubectl wait --for=jsonpath='{.status.phase}'=Running pod/trainer-dra --timeout=60s >/dev/null \
  || fail "the DRA pod is not running"
kubectl get resourceclaims
step "${gpu[*]} map -A   # both planes: device plugin and DRA"
has_dra_row() { "${gpu[@]}" map -A -o json | json "any(r['plane'] == 'dra' and r['pod'] == 'trainer-dra' and r['gpu_uuid'] for r in d['items'])" | grep -q True; }
until_ok 20 has_dra_row || fail "the map does not show the DRA pod on its GPU"
"${gpu[@]}" map -A
ok "the scheduler's allocation, shown on its physical GPU with plane dra"
# The device is NVIDIA's: the claim's allocated device in NVIDIA's slice names the GPU the map shows,
# and dra-a's kubelet prepared it through NVIDIA's plugin (its log says so).
step "the map's GPU for trainer-dra = the uuid of the device NVIDIA's slice lists for the claim"
dra_device() {
  claim=$(kubectl get pod trainer-dra -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
  device=$(kubectl get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[0].device}')
  published=$(kubectl get resourceslices -o json | json "[d['attributes']['uuid']['string'] for s in d['items'] for d in s['spec'].get('devices', []) if s['spec']['nodeName'] == 'dra-a' and d['name'] == '$device'][0]")
  shown=$("${gpu[@]}" map -A -o json | json "[r['gpu_uuid'] for r in d['items'] if r['pod'] == 'trainer-dra'][0]")
  echo "claim $claim: device $device of NVIDIA's slice, uuid $published; map: $shown"
  [ -n "$published" ] && [ "$published" = "$shown" ]
}
until_ok 20 dra_device || fail "the map's GPU is not the one NVIDIA's slice lists for the claim"
dra_device
grep -q "Returning newly prepared devices for claim 'default/$claim" "$node_dirs/dra-a/gpu-kubelet-plugin.log" \
  || fail "NVIDIA's plugin on dra-a did not prepare the claim"
grep -o "Returning newly prepared devices for claim 'default/$claim.*" "$node_dirs/dra-a/gpu-kubelet-plugin.log" | cut -c1-150
ok "the DRA pod's device comes from NVIDIA's ResourceSlice, allocated by the scheduler, prepared by NVIDIA's plugin"
step "${gpu[*]} top node/dra-a   # the DRA pod's own memory, from the agent on dra-a"
dra_top_ok() { "${gpu[@]}" top node/dra-a -o json | json "
any(r['kind'] == 'pod' and r['pod'] == 'trainer-dra' and r['memoryUsedBytes'] == 9 * 2**30 for r in d['items'])
and d['source']['kind'] == 'agent'" | grep -q True; }
until_ok 30 dra_top_ok || fail "top does not show the DRA pod's own 9 GiB on dra-a"
"${gpu[@]}" top node/dra-a
ok "9 GiB used by trainer-dra on the GPU its claim holds"

# 6. Why does a GPU pod not run?
step "kubectl apply -f <a pod asking for 3 x nvidia.com/mig-3g.40gb>; ${gpu[*]} doctor trainer"
kubectl apply -f - >/dev/null <<'POD'
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  containers:
  - {name: main, image: "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", resources: {limits: {nvidia.com/mig-3g.40gb: "3"}}}
POD
sleep 0.5
"${gpu[@]}" doctor trainer
[ $? -eq 1 ] || fail "doctor should find the pod cannot be scheduled"
ok "the failing layer is named: the scheduler (gpu-b has only 2 x 3g.40gb)"

# 7. Leave nothing behind.
kubectl delete pod infer-1 infer-2 infer-3 notebook trainer trainer-dra --wait=false >/dev/null
step "${gpu[*]} uninstall"
"${gpu[@]}" uninstall || fail "uninstall failed"
left=$(kubectl get nodes -o json | json "sorted(k for n in d['items'] for k, v in n['metadata'].get('labels', {}).items() if k.startswith('kubectl-gpu.io/') or v.startswith('kubectl-gpu'))")
[ "$left" = "[]" ] || fail "labels of ours left on nodes: $left"
ok "nothing of ours left on the nodes"

echo
echo "demo: done in $((SECONDS - started)) s."
