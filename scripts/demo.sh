#!/usr/bin/env bash
# The main job, for now: what `kubectl gpu validate` finds in realistic configs.
# (Grows into a demo against a simulated cluster as the cluster commands land.)
set -uo pipefail
cd "$(dirname "$0")/.."
if command -v kubectl >/dev/null 2>&1; then gpu=(kubectl gpu); else gpu=(kubectl-gpu); fi

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step "${gpu[*]} validate -R -f examples/device-plugin/valid -f examples/mig/valid"
"${gpu[@]}" validate -R -f examples/device-plugin/valid -f examples/mig/valid || exit 1

# A few mistakes the upstream tools accept silently or report only on the node.
for f in examples/device-plugin/invalid/both-strategies.yaml \
         examples/device-plugin/invalid/misplaced-sharing-keys-under-flags.yaml \
         examples/device-plugin/invalid/replicas-one.yaml \
         examples/device-plugin/invalid/configmap-key-with-invalid-config.yaml \
         examples/mig/invalid/bad-device-filter.yaml; do
  step "${gpu[*]} validate -f $f"
  "${gpu[@]}" validate -f "$f"
  [ $? -eq 1 ] || { echo "expected exit 1 for $f" >&2; exit 1; }
done

caught=0 total=0
for f in examples/device-plugin/invalid/*.yaml examples/mig/invalid/*.yaml; do
  total=$((total + 1))
  "${gpu[@]}" validate -f "$f" >/dev/null 2>&1
  [ $? -eq 1 ] && caught=$((caught + 1))
done
step "${gpu[*]} validate -f <each of the $total invalid examples>"
echo "$caught of $total invalid examples rejected with exit 1"
[ "$caught" -eq "$total" ]
