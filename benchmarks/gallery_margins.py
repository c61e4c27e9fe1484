"""How far each doctor-gallery run is from its thresholds, on seeds × CPU kernel variants.

    python benchmarks/gallery_margins.py [--seeds 0 1 2] [--entries NAME ...] [--no-healthy] [--workers 2]
                                         [--out FILE.json]

A gallery entry (``ladder.doctor.gallery``) claims: its broken run shows its signature and no other problem, its
fixed run no problem, and each rung's healthy preset no problem. Another CPU rounds differently and a tiny run ends
at other weights, so each claim is checked here on every seed under three kernel variants that round as other CPUs
do (native, AVX2-held, SIMD off: ``ATEN_CPU_CAPABILITY``, ``ONEDNN_MAX_CPU_ISA``, ``MKL_ENABLE_INSTRUCTIONS``).
Each run prints the doctor's findings with their evidence (the statistic against its threshold); the table at the
end gives, per run, whether the claim held everywhere and the evidence's range. Runs go to a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ladder.doctor import diagnose, read_run
from ladder.doctor.gallery import GALLERY, PRESETS, entry_flags, healthy_flags, write_data
from ladder.doctor.signatures import WORDING

VARIANTS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "no-simd": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
}


def jobs(entries: list[str], seeds: list[int], healthy: bool) -> list[tuple[str, str, list[str], list[str]]]:
    """(label, rung, flags, the problems the claim allows) for every run the gallery's claims rest on (``healthy``:
    each rung's healthy preset too)."""
    out = []
    for seed in seeds:
        for name in entries:
            failure = GALLERY[name]
            allowed = [failure.signature] if WORDING[failure.signature].severity == "problem" else []
            out.append((f"{name} broken seed {seed}", *entry_flags(name, seed=seed), allowed))
            out.append((f"{name} fixed seed {seed}", *entry_flags(name, fixed=True, seed=seed), []))
        for rung in PRESETS if healthy else ():
            out.append((f"{rung} healthy seed {seed}", rung, healthy_flags(rung, seed), []))
    return out


def run_one(rung: str, flags: list[str], variant: str, data: Path) -> dict:
    """One run under one kernel variant: the doctor's findings (name, severity, evidence)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run"
        flags = [flag.replace("{data}", str(data)) for flag in flags]
        env = {**os.environ, **VARIANTS[variant], "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-m", "ladder.run", rung, *flags, "--out", str(out)],
                              env=env, capture_output=True, text=True)
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1:]}
        findings = diagnose(read_run(out))
        return {"findings": [{"name": f.name, "severity": f.severity, "saw": f.saw} for f in findings]}


def held(result: dict, allowed: list[str]) -> bool:
    if "error" in result:
        return False
    return sorted(f["name"] for f in result["findings"] if f["severity"] == "problem") == sorted(allowed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--entries", nargs="+", default=list(GALLERY), choices=list(GALLERY))
    parser.add_argument("--no-healthy", action="store_true", help="leave out the rungs' healthy presets")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("gallery_margins.json"))
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp()) / "data"
    write_data(data)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    runs = jobs(args.entries, args.seeds, healthy=not args.no_healthy)
    todo = [(label, rung, flags, allowed, variant) for label, rung, flags, allowed in runs
            for variant in VARIANTS if f"{label} {variant}" not in results]

    def work(job):
        label, rung, flags, allowed, variant = job
        result = {**run_one(rung, flags, variant, data), "allowed": allowed}
        result["held"] = held(result, allowed)
        results[f"{label} {variant}"] = result
        args.out.write_text(json.dumps(results, indent=1))
        print(f"{label} {variant}: {'ok' if result['held'] else 'NOT HELD'} {result.get('findings', result)}",
              flush=True)

    with ThreadPoolExecutor(args.workers) as pool:
        list(pool.map(work, todo))
    failed = [key for key, r in results.items() if not r["held"]]
    print(f"{len(results) - len(failed)} of {len(results)} runs as the gallery claims; not: {failed or 'none'}")


if __name__ == "__main__":
    main()
