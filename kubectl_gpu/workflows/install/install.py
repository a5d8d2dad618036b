"""`kubectl gpu install`: apply the bundle the pre-flight plan chose, replacing what it replaces.

Owns the order of an install: the plan's problems stop it before the first write (`check`);
then delete each plugin `--replace-plugin` replaces (its manifest kept first, `replaced`),
apply the bundle (`apply`), and remove what an earlier install of another mode left that this
one does not have (`uninstall`, without touching the nodes). Must not render manifests
(bundle.py), choose options (preflight.py) nor judge health (`status`).
"""

from __future__ import annotations

from kubectl_gpu import bundle, cluster, preflight
from kubectl_gpu.errors import GpuError
from kubectl_gpu.workflows.install import replaced
from kubectl_gpu.workflows.install.apply import apply
from kubectl_gpu.workflows.install.objects import DryRun, Outcome, read
from kubectl_gpu.workflows.install.uninstall import uninstall


def check(plan: preflight.Plan) -> preflight.Plan:
    """`plan`, or one GpuError listing every problem (nothing has been written yet)."""
    if plan.problems:
        raise GpuError(
            f"pre-flight found {len(plan.problems)} problem(s); nothing was written:",
            hint="fix them, or choose with the flags each one names",
            details=tuple(plan.problems),
        )
    return plan


def install(api: cluster.Api, plan: preflight.Plan, dry_run: DryRun = "none") -> list[Outcome]:
    """Replace what `plan` replaces, apply the bundle, then drop what an earlier mode left."""
    live = read(api, {"kind": "Namespace", "metadata": {"name": plan.options.namespace}})
    before = bundle.recorded(live)
    objects = bundle.render(plan.options)
    outcomes = replaced.keep(api, objects, plan.replaces, dry_run) if plan.replaces else []
    outcomes += [replaced.replace(api, found, dry_run) for found in plan.replaces]
    done = {(o.kind, o.namespace, o.name) for o in outcomes}
    outcomes += [
        o for o in apply(api, objects, dry_run) if (o.kind, o.namespace, o.name) not in done
    ]
    if before is not None:
        wanted = {bundle.identity(o) for o in objects}
        stale = [o for o in bundle.render(before[1]) if bundle.identity(o) not in wanted]
        outcomes += uninstall(api, stale, dry_run, clean_nodes=False)
    return outcomes
