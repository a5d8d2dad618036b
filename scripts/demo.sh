#!/usr/bin/env bash
# The main job, for now: what `kubectl gpu validate` finds in realistic configs.
# (Grows into a demo against a simulated cluster as the cluster commands land.)
set -uo pipefail
cd "$(dirname "$0")/.."
if command -v kubectl >/dev/null 2>&1; then gpu=(kubectl gpu); else gpu=(kubectl-gpu); fi

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step "${gpu[*]} validate -f examples/ -R     # every valid example"
"${gpu[@]}" validate -R -f examples/device-plugin/valid -f examples/mig/valid || exit 1

for f in examples/device-plugin/invalid/*.yaml examples/mig/invalid/*.yaml; do
  step "${gpu[*]} validate -f $f"
  "${gpu[@]}" validate -f "$f"
  [ $? -eq 1 ] || { echo "expected exit 1 for $f" >&2; exit 1; }
done
echo
echo "demo: valid examples pass, every invalid example is caught (exit 1)."
