"""Faults in what a user brings — a dataset file, a reward module, an adapter, a path to export to — produced
for real: one line on stderr, exit code 2, no traceback, and nothing half-written (no run directory left
behind that would block the next run, no partial file)."""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import held_run
import pytest
import torch
from cli_helpers import run_cli
from lm_helpers import GSM8K_ROWS, save_tiny_qwen

from ladder import rewards
from ladder.policies import quant
from ladder.runtime.runlog import UsageError
from ladder.tasks import arithmetic, math_problems, tiny_lm

BOM = b"\xef\xbb\xbf"
GRPO = ("grpo --model {model} --dataset {rows} --steps 2 --prompts-per-step 2 --group-size 4 --max-new-tokens 8 "
        "--eval-size 1 --eval-every 0 --lora --threads 1 --no-progress")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny Qwen2 model and a GSM8K-style .jsonl file."""
    root = tmp_path_factory.mktemp("inputs")
    rows = root / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in GSM8K_ROWS))
    return {"model": save_tiny_qwen(root / "model"), "rows": str(rows)}


def _cli(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*shlex.split(command), cwd=cwd)


def _refused(result: subprocess.CompletedProcess, needle: str) -> str:
    """Exit code 2 and one line on stderr that contains ``needle``; returns the line."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    return lines[0]


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != ".lock"}  # the lock holds the pid of the last process that took it


# --- 1, 2: the dataset file ------------------------------------------------------------------------

def test_a_dataset_saved_with_a_byte_order_mark_loads(tmp_path):
    for name, text in [("bom.jsonl", "".join(json.dumps(r) + "\n" for r in GSM8K_ROWS)),
                       ("bom.json", json.dumps(GSM8K_ROWS))]:
        (tmp_path / name).write_text(text, encoding="utf-8-sig")  # as Notepad's "UTF-8 with BOM" saves it
        assert (tmp_path / name).read_bytes().startswith(BOM)
        train, held_out = math_problems.split("gsm8k", str(tmp_path / name), 1)
        assert train[0]["question"] == GSM8K_ROWS[0]["question"] and held_out[0]["answer"] == "12"


@pytest.mark.parametrize("change, where, needle", [
    (lambda r: r.update(question=None), "line 3", "'question' is null"),
    (lambda r: r.update(answer=None), "line 3", "'answer' is null"),
    (lambda r: r.pop("answer"), "line 3", "no 'answer' field"),
    (lambda r: r.update(question=["What", "is", "2?"]), "line 3", "'question' is a list"),
    (lambda r: r.update(answer=True), "line 3", "'answer' is a boolean"),
])
def test_a_row_with_a_missing_or_wrong_field_is_one_line_naming_it(tmp_path, change, where, needle):
    rows = [dict(r) for r in GSM8K_ROWS]
    change(rows[2])
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "rows.json").write_text(json.dumps(rows, indent=2))  # a JSON file: the place in its list
    for name, place in [("rows.jsonl", where), ("rows.json", "row 3")]:
        with pytest.raises(UsageError) as error:
            math_problems.split("gsm8k", str(tmp_path / name), 1)
        assert f"--dataset {tmp_path / name}: {place}: {needle}; every row needs" in str(error.value)


def test_a_number_answer_and_a_file_that_is_not_utf8(tmp_path):
    rows = [{"question": r["question"], "answer": int(r["answer"].split("####")[1])} for r in GSM8K_ROWS]
    (tmp_path / "numbers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert math_problems.split("gsm8k", str(tmp_path / "numbers.jsonl"), 1)[1] == [
        {"question": GSM8K_ROWS[-1]["question"], "answer": "12"}]
    (tmp_path / "latin1.jsonl").write_bytes('{"question": "Café: 2 + 3?", "answer": "#### 5"}\n'.encode("latin-1"))
    with pytest.raises(UsageError, match=r"latin1.jsonl: not UTF-8 text \(byte 17\); save it as UTF-8"):
        math_problems.load_gsm8k(str(tmp_path / "latin1.jsonl"))


def test_a_null_question_through_the_command_line(files, tmp_path):
    rows = [dict(r) for r in GSM8K_ROWS]
    rows[1]["question"] = None
    (tmp_path / "null.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = _cli(GRPO.format(model=files["model"], rows=tmp_path / "null.jsonl") + " --out out", tmp_path)
    _refused(result, f"--dataset {tmp_path / 'null.jsonl'}: line 2: 'question' is null")
    assert not (tmp_path / "out").exists()


# --- 3: a reward module that exits ---------------------------------------------------------------

ARGPARSE_AT_IMPORT = '''
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--scale", type=float, default=1.0)
ARGS = parser.parse_args()  # ladder's command line: "unrecognized arguments", then sys.exit(2)


def scaled(completions, answers):
    return [ARGS.scale] * len(completions)
'''


def test_a_reward_module_that_exits_at_import_leaves_nothing_and_the_next_run_starts(files, tmp_path):
    (tmp_path / "cli_rewards.py").write_text(ARGPARSE_AT_IMPORT)
    command = GRPO.format(**files) + " --out out"
    line = _refused(_cli(command + " --reward-funcs cli_rewards.py:scaled", tmp_path),
                    "--reward-funcs: cannot load 'cli_rewards.py:scaled' (importing it called sys.exit(2); it "
                    "printed '")
    assert "error: unrecognized arguments" in line
    assert not (tmp_path / "out").exists()
    again = _cli(command, tmp_path)  # the same --out, the built-in rewards
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["steps"] == 2


def test_a_reward_function_that_exits_is_one_line_naming_the_sample(tmp_path, capsys):
    (tmp_path / "exits.py").write_text(
        "import sys\n\nprint('loading exits.py')\n\n\n"
        "def picky(completions, answers):\n"
        "    print('scoring', len(completions))\n"
        "    if any('no' in c for c in completions):\n"
        "        sys.exit('cannot score that')\n"
        "    return [1.0] * len(completions)\n")
    name, fn = rewards.load_reward_function(f"{tmp_path / 'exits.py'}:picky")
    assert capsys.readouterr().out == "loading exits.py\n"  # what a module that loads prints is passed on
    with pytest.raises(UsageError) as error:
        rewards.call_reward(name, fn, ["#### 5", "no answer"], ["5", "6"])
    assert str(error.value) == ("reward function 'picky' called sys.exit('cannot score that') on completion 1: "
                                "'no answer'; it printed 'scoring 2'")
    assert capsys.readouterr() == ("", "")  # nothing but the one line
    assert rewards.call_reward(name, fn, ["#### 5"], ["5"]).tolist() == [1.0]
    assert capsys.readouterr().out == "scoring 1\n"


SLEEPS_FOREVER = '''
import time


def slow(completions, answers):
    while True:
        time.sleep(60)
'''


@pytest.mark.parametrize("rung", ["grpo", "agent"])
def test_reward_timeout_stops_a_reward_function_that_never_returns_in_one_line(rung, tmp_path):
    (tmp_path / "mymod.py").write_text(SLEEPS_FOREVER)
    start = time.monotonic()
    result = _cli(f"{rung} --preset tiny --steps 1 --eval-every 0 --eval-size 1 --no-progress "
                  "--reward-funcs mymod:slow --reward-timeout 1 --out out", tmp_path)
    elapsed = time.monotonic() - start
    line = _refused(result, "reward function 'slow' did not return within 1 s on the batch of 64 completions")
    assert line.startswith("ladder: ")
    assert elapsed < 60, elapsed  # the limit given, not the default of rewards.TIME_LIMIT_S = 600 s


# --- 4: an adapter trained on another base model -------------------------------------------------

@pytest.fixture(scope="module")
def adapters(files, tmp_path_factory):
    """A LoRA adapter saved from a model of another size (built from a config, saved, loaded back as a run
    would load it), and one saved from the test's own model."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("adapters")
    corpus = [r["question"] + " " + r["answer"] for r in GSM8K_ROWS] * 5
    torch.manual_seed(0)
    other = tiny_lm.build_model("qwen2", arithmetic.chat_tokenizer(corpus, vocab_size=300), hidden=32, layers=1,
                                heads=2, max_positions=256)
    other.save_pretrained(root / "other-model")
    for name, base in [("other", root / "other-model"), ("same", files["model"])]:
        model = AutoModelForCausalLM.from_pretrained(base)
        get_peft_model(model, quant.lora_config(4, 8)).save_pretrained(root / name)
    return {"other": str(root / "other"), "same": str(root / "same"), "other_base": str(root / "other-model")}


def test_an_adapter_of_another_base_model_is_one_line(files, adapters, tmp_path):
    base = json.loads((Path(adapters["other"]) / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert base == adapters["other_base"]
    command = (f"eval --model {files['model']} --task gsm8k --dataset {files['rows']} --eval-size 1 "
               f"--max-new-tokens 8 --adapter {adapters['other']} --out out")
    line = _refused(_cli(command, tmp_path), f"--adapter {adapters['other']} does not fit --model {files['model']} (")
    assert re.search(r"\(model\.layers\.0\.\S+ has (input|output) size \d+, the adapter's \d+\); it was trained on "
                     + re.escape(repr(base)), line), line
    assert not (tmp_path / "out").exists()


def test_an_adapter_of_the_same_model_fits(files, adapters):
    from transformers import AutoModelForCausalLM

    quant.check_adapter(adapters["same"], AutoModelForCausalLM.from_pretrained(files["model"]), files["model"])


# --- 5: --export-trl to a place that cannot take the script --------------------------------------

def test_export_trl_into_a_directory_is_one_line_and_writes_nothing(files, tmp_path):
    (tmp_path / "scripts").mkdir()
    result = _cli(f"grpo --model {files['model']} --dataset {files['rows']} --export-trl scripts", tmp_path)
    _refused(result, "--export-trl scripts is a directory; give a file name for the script")
    assert list((tmp_path / "scripts").iterdir()) == []
    (tmp_path / "notes.txt").write_text("mine\n")  # a parent that is a file
    result = _cli(f"grpo --model {files['model']} --dataset {files['rows']} --export-trl notes.txt/s.py", tmp_path)
    _refused(result, "--export-trl notes.txt/s.py: a parent of it is a file, not a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "scripts"]


@pytest.fixture
def full_disk(tmp_path):
    """A 4 kB tmpfs: the script (some 20 kB) does not fit. Skipped where mounting is not permitted."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("mount is not permitted here")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_export_trl_onto_a_full_disk_leaves_nothing(files, full_disk):
    from ladder.rungs import grpo
    from ladder.trl import export as export_trl

    target = full_disk / "new" / "deeper" / "grpo_trl.py"
    cfg = grpo.Config(model=files["model"], dataset=files["rows"], eval_size=1, export_trl=str(target))
    with pytest.raises(UsageError) as error:
        export_trl.write(cfg, cfg.export_trl)
    assert str(error.value) == f"--export-trl {target}: cannot write there (No space left on device)"
    assert list(full_disk.iterdir()) == []  # no partial script, no temporary file, no folder made for it


# --- 6: the dataset changed between a run and its resume -----------------------------------------

HOLD = '''
import os
import time

calls = 0


def hold(completions, answers):
    """From its second call on, waits while the file "hold" exists (two minutes at most)."""
    global calls
    calls += 1
    deadline = time.time() + 120
    while calls >= 2 and os.path.exists("hold") and time.time() < deadline:
        time.sleep(0.02)
    return [0.0] * len(completions)
'''


def _interrupted_run(files, tmp_path) -> Path:
    """A 3-update run on a dataset saved with a byte-order mark, stopped with SIGINT in its second update
    (after the first checkpoint): its reward function holds it there until it is interrupted."""
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(BOM + Path(files["rows"]).read_bytes())
    (tmp_path / "hold.py").write_text(HOLD)
    (tmp_path / "hold").write_text("")
    command = (GRPO.format(model=files["model"], rows=rows).replace("--steps 2", "--steps 3")
               + " --checkpoint-every 1 --reward-funcs correctness,hold.py:hold --out run")
    proc = subprocess.Popen([sys.executable, "-m", "ladder.run", *shlex.split(command)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=held_run.as_a_shell_starts_it)
    deadline = time.time() + 240
    while not (tmp_path / "run" / "checkpoint.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "continue with: python -m ladder.run grpo --resume run" in stderr, stderr
    (tmp_path / "hold").unlink()
    return rows


def test_a_dataset_changed_since_the_run_started_is_refused_on_resume(files, tmp_path):
    rows = _interrupted_run(files, tmp_path)
    original = rows.read_bytes()
    rows.write_bytes(original.replace(b"#### 15", b"#### 16"))  # one answer corrected in the meantime
    before = _snapshot(tmp_path / "run")
    line = _refused(_cli("grpo --resume run --no-progress", tmp_path),
                    f"--dataset {rows} changed since the run started (sha256:")
    assert "put back the data it started with to resume it, or start a new run with another --out" in line
    assert _snapshot(tmp_path / "run") == before  # the interrupted run is as it was, still resumable
    rows.write_bytes(original)
    resumed = _cli("grpo --resume run --no-progress", tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 3


def test_hub_ids_compare_by_revision_only_when_both_are_known():
    check = math_problems.check_unchanged
    check("openai/gsm8k", "hub:openai/gsm8k@abc", "hub:openai/gsm8k")
    check("openai/gsm8k", "hub:openai/gsm8k", "hub:openai/gsm8k@abc")
    check("rows.jsonl", None, "sha256:0123")  # a checkpoint saved before fingerprints were kept
    with pytest.raises(UsageError, match=r"\(hub:openai/gsm8k@abc then, hub:openai/gsm8k@def now\)"):
        check("openai/gsm8k", "hub:openai/gsm8k@abc", "hub:openai/gsm8k@def")
