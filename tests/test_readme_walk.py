"""The README's commands, walked top to bottom as a newcomer runs them: no run is refused because an
earlier, different run took its default --out; the `eval` after the QLoRA run loads the adapter on the base
the run trained; every `runs/…` path the docs name is one a command writes; the TRL script, run where TRL
is not installed, says so in one line."""

import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ladder.run import load_rung, make_config
from ladder.trl import export as export_trl

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NOT_A_RUN = {"--help", "--print-config", "--export-trl", "--resume"}


def readme_commands() -> list[list[str]]:
    """Every ``-m ladder.run`` command of the README's bash blocks, in order: the words after ``ladder.run``."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part.split(" #")[0])
                at = [i for i, w in enumerate(words) if w == "ladder.run" and i and words[i - 1] == "-m"]
                if at:
                    commands.append(words[at[0] + 1:])
    return commands


def config(argv: list[str]):
    """The run's Config as the command line builds it (--device cuda left out: the name does not depend on it)."""
    i = argv.index("--device") if "--device" in argv else None
    argv = argv if i is None else argv[:i] + argv[i + 2:]
    return make_config(argv[0], load_rung(argv[0]), argv[1:])


def runs() -> list[list[str]]:
    return [argv for argv in readme_commands() if not NOT_A_RUN & set(argv)]


def test_the_readme_has_the_commands_this_file_walks():
    names = [" ".join(argv) for argv in runs()]
    assert len(names) >= 12
    for expected in ("cartpole", "grpo --qlora --preset tiny", "grpo --preset tiny"):
        assert expected in names
    assert any("my_rewards.py:brevity" in n for n in names) and any(n.startswith("eval ") for n in names)


def walk() -> dict[Path, list[str]]:
    """The README's runs in order, in the current directory, each leaving its output directory (and an
    adapter in it) behind: {directory: the command that wrote it}. A later, different run must not land in
    one of them, and the eval's --adapter must be a directory an earlier run made (it is checked to exist
    when the eval's options are read)."""
    taken = {}
    for argv in runs():
        out = Path(config(argv).out)
        assert taken.setdefault(out, argv) == argv, f"{' '.join(argv)!r} would write into {out}, the directory " \
                                                    f"of {' '.join(taken[out])!r}"
        (out / "adapter").mkdir(parents=True, exist_ok=True)
    return taken


def test_different_readme_runs_never_share_a_directory_and_eval_finds_its_adapter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    taken = walk()
    assert len(taken) >= 10


def test_eval_loads_the_adapter_on_the_base_its_run_trained(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evals = [argv for argv in runs() if argv[0] == "eval"]
    assert evals
    for argv in evals:
        adapter = Path(argv[argv.index("--adapter") + 1])
        trained = [a for a in runs() if a[0] == "grpo" and Path(config(a).out) / "adapter" == adapter]
        assert trained, f"no README grpo command writes {adapter}"
        adapter.mkdir(parents=True)
        run, ev = config(trained[0]), config(argv)
        assert (ev.qlora, ev.model) == (run.adapter.qlora, run.model), f"{' '.join(argv)!r} loads another base than " \
                                                              f"{' '.join(trained[0])!r}"


def test_the_runs_paths_the_docs_name_are_written_by_a_readme_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = set(walk())
    docs = [README, *sorted((ROOT / "notebooks").glob("text_*.py"))]
    named = {(doc.name, m) for doc in docs for m in re.findall(r"\bruns/[a-z0-9][\w.-]*[a-z0-9]", doc.read_text())}
    assert named
    for doc, path in named:
        assert Path(path) in written, f"{doc} names {path}, which no README command writes"


@pytest.mark.parametrize("argv, out", [
    ("cartpole", "runs/cartpole-seed0"),
    ("cartpole --use-exercises --seed 3", "runs/cartpole-exercises-seed3"),
    ("grpo --preset tiny", "runs/grpo-tiny-seed0"),  # the preset's own LoRA is not named again
    ("grpo --qlora --preset tiny", "runs/grpo-tiny-qlora-seed0"),
    ("grpo --preset tiny --algo dapo", "runs/grpo-tiny-dapo-seed0"),
    ("grpo --preset tiny --algo grpo", "runs/grpo-tiny-seed0"),  # --algo grpo: the defaults
    ("ppo-sentiment --preset tiny --lora", "runs/ppo-sentiment-tiny-lora-seed0"),
    ("grpo --preset tiny --out mine", "mine"),
])
def test_default_out_names(argv, out):
    assert config(argv.split()).out == out


def test_the_exported_script_without_trl_stops_with_one_line_saying_how_to_install_it(tmp_path):
    """TRL really absent: the script runs with this environment's packages except TRL (links to each, no
    site-packages processing) and ladder from this checkout."""
    script = tmp_path / "train_trl.py"
    export_trl.write(config(["grpo", "--preset", "tiny"]), script)
    packages = tmp_path / "packages"
    packages.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name != "trl" and not entry.name.startswith("trl-"):
            (packages / entry.name).symlink_to(entry)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(packages), str(ROOT)])}
    assert subprocess.run([sys.executable, "-S", "-c", "import torch, transformers, ladder"], env=env).returncode == 0
    done = subprocess.run([sys.executable, "-S", str(script), "--max-steps", "1"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == ('this script needs TRL: pip install "trl>=1.16,<2" (in a checkout of '
                                            'ladder: pip install -e ".[dev]")')
