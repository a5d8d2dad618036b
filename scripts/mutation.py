"""Mutation score of validate's reading and rules, with mutants a tool generates (cosmic-ray).

`make mutation` (not part of `make test`: it takes hours for every mutant) copies the tree to a
scratch directory, lets cosmic-ray generate every mutant of its operators over the modules
below, keeps a seeded random sample of them (`--sample`, `--seed`; 0 keeps all), runs the tests
below against each mutant in that copy (the working tree is never mutated), and prints
killed / survived / incompetent with each survivor's diff. Which survivors are equivalent is
judged by reading them; docs/validate-vs-upstream.md ("Mutation score") has the figures.

    python3 scripts/mutation.py --sample 40 --seed 31 --report /tmp/mutation.txt
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTATED = (
    "kubectl_gpu/validation",
    "kubectl_gpu/documents",
    "kubectl_gpu/sharing",
    "kubectl_gpu/mig/spec.py",
)
# The unit tests first (seconds), then the conformance corpora and the differential suite
# (minutes): `-x` stops at the first failure, so a mutant they kill costs little.
TESTS = (
    "tests/test_validate_reads_configs_as_upstream_does.py",
    "tests/test_yaml_edge_forms_read_as_nvidia_does.py",
    "tests/test_yaml_problems_are_located.py",
    "tests/test_schema_errors_read_like_advice.py",
    "tests/sharing",  # the config rules, and the rollout planner sharing/ also holds
    "tests/mig/test_mig_config_rules.py",
    "tests/mig/test_mig_config_model.py",
    "tests/mig/test_mig_files_validate.py",
    "tests/mig/test_mig_specs_select_gpus_like_mig_parted.py",
    "tests/cli/test_validate_command.py",
    "tests/cli/test_validate_refuses_hostile_input_clearly.py",
    "tests/differential/test_yaml_corpora_read_as_nvidia_does.py",
    "tests/differential/test_past_disagreements_stay_fixed.py",
    "tests/differential/test_configmaps_agree_with_upstream.py",
    "tests/differential/test_validate_agrees_with_upstream.py",
)
COPIED = ("kubectl_gpu", "tests", "schemas", "examples", "docs", "scripts", "tools", "setup.cfg",
          "pyproject.toml")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=40, help="mutants to run (0: all)")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--examples", type=int, default=1000, help="differential draw size")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per mutant")
    parser.add_argument("--report", type=Path, help="also write the report here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="kubectl-gpu-mutation-"))
    try:
        _copy(scratch)
        session = scratch / "session.sqlite"
        config = _config(scratch, args.timeout)
        env = _env(scratch, args.examples)
        cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
        subprocess.run(
            [*cosmic, "init", str(config), str(session)], cwd=scratch, env=env, check=True
        )
        # The tests must pass on the unmutated copy, or every mutant would count as killed.
        baseline = subprocess.run(_command(), cwd=scratch, env=env, check=False)
        if baseline.returncode != 0:
            sys.stderr.write("mutation: the tests fail on the unmutated copy; no score\n")
            return 1
        total, kept = _sample(session, args.sample, args.seed)
        sys.stdout.write(f"mutation: {kept} of {total} generated mutants, seed {args.seed}\n")
        sys.stdout.flush()
        subprocess.run(
            [*cosmic, "exec", str(config), str(session)], cwd=scratch, env=env, check=True
        )
        report = _report(session, scratch, total, kept, args.seed)
    finally:
        if args.keep:
            sys.stdout.write(f"mutation: scratch copy kept in {scratch}\n")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    sys.stdout.write(report + "\n")
    if args.report:
        args.report.write_text(report)
    return 0


def _copy(scratch: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            skip = shutil.ignore_patterns("__pycache__", ".pytest_cache")
            shutil.copytree(source, scratch / name, symlinks=True, ignore=skip)
        else:
            shutil.copy2(source, scratch / name)


def _command() -> list[str]:
    return [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *TESTS]


def _config(scratch: Path, timeout: int) -> Path:
    command = " ".join(_command())
    modules = ", ".join(json.dumps(m) for m in MUTATED)
    config = scratch / "cosmic-ray.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = [{modules}]\n"
        f"timeout = {timeout}.0\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    return config


def _env(scratch: Path, examples: int) -> dict[str, str]:
    """The copy's package first on the path (the venv's editable install points at the
    working tree), and a smaller fixed draw for the differential suite."""
    return {
        **os.environ,
        "PYTHONPATH": str(scratch),
        "KUBECTL_GPU_DIFFERENTIAL_EXAMPLES": str(examples),
    }


def _sample(session: Path, size: int, seed: int) -> tuple[int, int]:
    """Keep a seeded random sample of the generated work items (cosmic-ray has no sampler)."""
    with sqlite3.connect(session) as db:
        ids = [row[0] for row in db.execute("SELECT job_id FROM work_items ORDER BY job_id")]
        if size <= 0 or size >= len(ids):
            return len(ids), len(ids)
        keep = set(random.Random(seed).sample(ids, size))
        dropped = [(i,) for i in ids if i not in keep]
        db.executemany("DELETE FROM mutation_specs WHERE job_id = ?", dropped)
        db.executemany("DELETE FROM work_items WHERE job_id = ?", dropped)
        return len(ids), size


def _report(session: Path, scratch: Path, total: int, kept: int, seed: int) -> str:
    dump = subprocess.run(
        [sys.executable, "-m", "cosmic_ray.cli", "dump", str(session)],
        capture_output=True, text=True, check=True, cwd=scratch,
    )  # fmt: skip
    counts: dict[str, int] = {}
    survivors = []
    for line in dump.stdout.splitlines():
        item, result = json.loads(line)
        outcome = (result or {}).get("test_outcome") or (result or {}).get("worker_outcome") or "?"
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "survived":
            spec = item["mutations"][0]
            where = f"{spec['module_path']}:{spec['start_pos'][0]} {spec['operator_name']}"
            survivors.append(f"- {where}\n{(result or {}).get('diff', '').strip()}")
    lines = [f"cosmic-ray: {kept} of {total} mutants (seed {seed}): " + ", ".join(
        f"{n} {k}" for k, n in sorted(counts.items()))]  # fmt: skip
    return "\n".join([*lines, "survivors:", *survivors])


if __name__ == "__main__":
    sys.exit(main())
