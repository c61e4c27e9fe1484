"""``ladder.core`` is pure torch: no environments, tokenizers, adapters or quantisation; and it names
no method or class of the layers above it (the rungs map methods onto the core's math)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "ladder" / "core"
FORBIDDEN = ("gymnasium", "transformers", "peft", "bitsandbytes")
NAMES_ABOVE_THE_CORE = ("dr_grpo", "dapo", "CausalLMPolicy")  # a method's flag, a policy class of ladder.policies


def forbidden_imports(source: str, filename: str = "<source>") -> list[str]:
    """Top-level names of forbidden libraries imported anywhere in ``source`` (any nesting)."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [n for n in names if n.split(".")[0] in FORBIDDEN]
    for node in ast.walk(ast.parse(source, filename=filename)):        # importlib / __import__ calls
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0].value
            if name in ("import_module", "__import__") and isinstance(arg, str):
                if arg.split(".")[0] in FORBIDDEN:
                    found.append(arg)
    return found


def test_import_in_fresh_interpreter_loads_no_heavy_library():
    code = (
        "import sys, ladder.core\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(repr(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"ladder.core imported {proc.stdout.strip()}\n{proc.stderr}"
    assert proc.stdout.strip() == "[]"


def test_core_sources_have_no_forbidden_import_statement():
    files = sorted(CORE.rglob("*.py"))
    assert {"advantages.py", "batch.py", "kl.py", "losses.py", "stats.py", "update.py"} <= {
        f.name for f in files}
    offenders = {}
    for f in files:
        bad = forbidden_imports(f.read_text(encoding="utf-8"), str(f))
        if bad:
            offenders[str(f.relative_to(ROOT))] = bad
    assert not offenders, offenders


def test_core_sources_name_no_method_and_no_class_above_them():
    """Case-sensitive: a docstring may cite the DAPO or Dr. GRPO paper, the code never picks by method."""
    files = sorted(CORE.rglob("*.py"))
    offenders = {str(f.relative_to(ROOT)): [n for n in NAMES_ABOVE_THE_CORE if n in f.read_text(encoding="utf-8")]
                 for f in files}
    assert len(files) >= 6 and not any(offenders.values()), offenders


@pytest.mark.parametrize("source", [
    "import transformers",
    "import gymnasium as gym",
    "from peft import LoraConfig",
    "import os, bitsandbytes.nn",
    "def f():\n    from transformers.models import llama\n",
    "try:\n    import gymnasium\nexcept ImportError:\n    pass\n",
    "import importlib\nm = importlib.import_module('peft')\n",
    "m = __import__('bitsandbytes')\n",
])
def test_static_check_catches_forbidden_imports(source):
    assert forbidden_imports(source)


@pytest.mark.parametrize("source", [
    "import torch",
    "from torch import nn",
    "from .batch import Batch",
    "import transformers_like_name_but_not_it",
    "x = 'import transformers'  # a string, not an import",
])
def test_static_check_allows_other_imports(source):
    assert forbidden_imports(source) == []
