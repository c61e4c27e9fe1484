"""Compare two recordings of benchmarks/loop_presets.sh: every metrics.jsonl line by line, the same keys in the same
order and the same values, apart from ``wall_s`` and ``time/*`` (clock readings); summary.json likewise, apart from
its clock readings. Usage: python benchmarks/loop_compare.py BEFORE_DIR AFTER_DIR [NAME ...]"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CLOCK = {"wall_s", "load_s"}


def without_clock(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in CLOCK and not k.startswith("time/")}


def differences(before: Path, after: Path) -> list[str]:
    """What differs between two runs' directories (empty: identical apart from the clock)."""
    found = []
    old = [json.loads(line) for line in (before / "metrics.jsonl").read_text().splitlines()]
    new = [json.loads(line) for line in (after / "metrics.jsonl").read_text().splitlines()]
    if len(old) != len(new):
        found.append(f"metrics.jsonl: {len(old)} lines before, {len(new)} after")
    for i, (a, b) in enumerate(zip(old, new)):
        a, b = without_clock(a), without_clock(b)
        if list(a) != list(b):
            found.append(f"metrics line {i + 1}: keys {list(a)} != {list(b)}")
        found += [f"metrics line {i + 1}: {k} {a[k]!r} != {b.get(k)!r}" for k in a if a[k] != b.get(k)]
    s_old, s_new = (without_clock(json.loads((d / "summary.json").read_text())) for d in (before, after))
    found += [f"summary.json: {k} {s_old.get(k)!r} != {s_new.get(k)!r}" for k in set(s_old) | set(s_new)
              if s_old.get(k) != s_new.get(k)]
    return found


def main(before: str, after: str, names: list[str]) -> int:
    names = names or sorted(p.name for p in Path(before).iterdir() if p.is_dir())
    bad = 0
    for name in names:
        found = differences(Path(before) / name, Path(after) / name)
        print(f"{name}: {'identical' if not found else 'DIFFERENT'}")
        for line in found[:10]:
            print("   ", line)
        bad += bool(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
