"""Bad input, through the real command line: exit code 2, one line naming the problem and the fix,
no traceback, and no output directory left behind (an existing one is left exactly as it was).

Each row is ``(command, what stderr must contain)``. The placeholders are files made once for the
module: a tiny Qwen2 model, small GSM8K-style datasets, a file of user reward functions, a finished
run and an interrupted one. README.md ("When something goes wrong") shows the same table.
"""

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from cli_helpers import run_cli

from ladder.rungs import reinforce
from ladder.tasks import arithmetic, tiny_lm

ROWS = [{"question": f"What is {a} + {b}?", "answer": f"{a}+{b}={a + b}\n#### {a + b}"}
        for a, b in [(2, 3), (12, 3), (10, 4), (7, 2), (6, 6), (9, 9)]]

REWARDS = '''
import math


def explodes(completions, answers):
    raise ValueError("no answer here")


def nan_at_3(completions, answers):
    rewards = [0.0] * len(completions)
    rewards[3] = math.nan
    return rewards


def inf_at_last(completions, answers):
    return [0.0] * (len(completions) - 1) + [math.inf]


def three(completions, answers):
    return [0.0, 0.0, 0.0]
'''

# One short, valid GRPO run on the local tiny model; each row changes one thing.
GRPO = ("grpo --model {model} --dataset {gsm8k} --steps 1 --prompts-per-step 2 --group-size 4 "
        "--max-new-tokens 8 --kl-coef 0 --no-progress")
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")

CASES = [
    pytest.param("nosuchrung", "unknown rung 'nosuchrung'; choose one of: reinforce", id="unknown-rung"),
    pytest.param("grpo --preset huge", "unknown preset 'huge' for grpo; choose one of: tiny", id="unknown-preset"),
    pytest.param(GRPO + " --group-size 1", "--group-size must be at least 2", id="group-size-1"),
    pytest.param(GRPO + " --mu 0", "--mu must be at least 1, got 0", id="mu-0"),
    pytest.param(GRPO + " --clip-eps 0", r"--clip-eps must be in \(0, 1\), got 0.0", id="eps-0"),
    pytest.param(GRPO + " --lr 0", "--lr must be positive, got 0.0", id="lr-0"),
    pytest.param("cartpole --lr -0.001", "--lr must be positive, got -0.001", id="lr-negative"),
    pytest.param("cartpole --lr -1e-3", "--lr must be positive, got -0.001", id="lr-negative-exponent"),
    pytest.param(GRPO + " --prompts-per-step 3 --group-size 2 --num-minibatches 4",
                 "3 prompts × 2 completions cannot be split into 4 equal minibatches", id="minibatches"),
    pytest.param(GRPO + " --reward-weights 1,2,3", r"--reward-weights needs 2 numbers \(correctness,format\)",
                 id="reward-weights-count"),
    pytest.param(GRPO + " --model Qwen/Qwen2.5-0.5B-Instruct",
                 "--model 'Qwen/Qwen2.5-0.5B-Instruct' is not a local path .* use --preset tiny", id="model-offline"),
    pytest.param(GRPO + " --device cuda",
                 r"--device must be a torch device that exists here \(cpu; no CUDA GPU here\), got 'cuda'",
                 id="cuda-device", marks=NO_CUDA),
    pytest.param(GRPO + " --optim paged_adamw_8bit", "--optim paged_adamw_8bit needs a CUDA GPU; use --optim adamw",
                 id="cuda-optimizer", marks=NO_CUDA),
    pytest.param(GRPO + " --dataset {empty}", "--dataset .*empty.jsonl: no rows", id="dataset-empty"),
    pytest.param(GRPO + " --dataset {malformed}", r"--dataset .*malformed.jsonl: not valid JSON/JSONL",
                 id="dataset-malformed"),
    pytest.param(GRPO + " --dataset {fields}", r"--dataset .*fields.jsonl: line 1: no 'question' field; every row "
                 r"needs a 'question' string and an 'answer' \(a string ending in '#### N', or a number\)",
                 id="dataset-missing-fields"),
    pytest.param(GRPO + " --dataset {one}", r"--dataset .*one.jsonl: 1 row, nothing left to train on; a dataset "
                 r"with one split holds out its last rows", id="dataset-one-row"),
    pytest.param(GRPO + " --train-size 9", r"--train-size 9 is more than the 5 training problems in --dataset "
                 r".*gsm8k.jsonl \(6 rows, the last 1 held out\); use at most 5, or 0 for all",
                 id="train-size-too-large"),
    pytest.param(GRPO + " --prompts-per-step 6", "--prompts-per-step 6 is more than the 5 training problems in "
                 "--dataset .*; use at most 5", id="prompts-per-step-too-many"),
    pytest.param("grpo --task arithmetic --model {model} --eval-size 8100 --steps 1 --no-progress",
                 "--eval-size 8100 leaves no problem to train on: the arithmetic task has 8,100 sums; hold out at "
                 "most 8,099", id="eval-size-leaves-no-training"),
    pytest.param("eval --task arithmetic --model {model} --eval-size 8100", "--eval-size 8100 leaves no problem to "
                 "train on", id="eval-command-eval-size"),
    pytest.param(GRPO + " --dataset {long}", r"a prompt of \d+ tokens plus --max-new-tokens 8 exceeds the model's "
                 "context of 256 tokens", id="prompt-too-long"),
    pytest.param(GRPO + " --reward-funcs {rewards}:missing",
                 r"--reward-funcs: cannot load '.*rewards.py:missing' \(AttributeError", id="reward-func-missing"),
    pytest.param(GRPO + " --reward-funcs no_such_module:score",
                 r"--reward-funcs: cannot load 'no_such_module:score' \(ModuleNotFoundError",
                 id="reward-module-missing"),
    pytest.param(GRPO + " --reward-funcs {rewards}:explodes",
                 r"reward function 'explodes' raised ValueError: no answer here on completion 0: ['\"]",
                 id="reward-raises"),
    pytest.param(GRPO + " --reward-funcs {rewards}:nan_at_3", "reward function 'nan_at_3' returned nan for "
                 "completion 3: .*; rewards must be finite numbers", id="reward-nan"),
    pytest.param(GRPO + " --reward-funcs correctness,{rewards}:inf_at_last", "reward function 'inf_at_last' "
                 "returned inf for completion 7: ", id="reward-inf"),
    pytest.param(GRPO + " --reward-funcs {rewards}:three", "reward function 'three' returned 3 rewards for 8 "
                 "completions", id="reward-wrong-length"),
    pytest.param(GRPO.replace(" --no-progress", "") + " --reward-funcs {rewards}:three",
                 "reward function 'three' returned 3 rewards for 8 completions", id="error-under-progress-bar"),
    pytest.param("grpo --resume {interrupted}", "--resume .*interrupted is a 'reinforce' run, not 'grpo'; "
                 "resume it with `python -m ladder.run reinforce",
                 id="resume-other-rung"),
    pytest.param("reinforce --out {finished} --total-steps 300",
                 "--out .*finished already holds a finished run; pass --overwrite", id="out-holds-finished-run"),
    pytest.param(GRPO + " --kl-in reward --kl-correction on", "--kl-correction weighs the KL term of the loss; with "
                 "--kl-in reward .* drop --kl-correction", id="kl-in-reward-with-correction"),
    pytest.param(GRPO + " --ref-sync-every 5 --kl-coef 0", "--ref-sync-every refreshes π_ref, but --kl-coef 0 never "
                 "uses it", id="ref-sync-without-kl"),
    pytest.param(GRPO + " --advantage rloo --scale-rewards group", "--advantage rloo takes --scale-rewards none or "
                 "batch", id="rloo-group-scale"),
    pytest.param(GRPO + " --ratio-level sequence --loss-type cispo", "--loss-type cispo weighs every token by its own "
                 "ratio; --ratio-level sequence is GSPO's", id="sequence-ratio-cispo"),
    pytest.param(GRPO + " --delta 1.1", r"--delta must exceed 1 \+ --clip-eps-high = 1.2, got 1.1",
                 id="delta-inside-clip"),
    pytest.param(GRPO + " --delta 2 --loss-type cispo", "--delta caps the clipped surrogate's ratio; --loss-type "
                 "cispo has no clip", id="delta-cispo"),
    pytest.param(GRPO + " --loss-type vespo --ratio-level sequence", "--loss-type vespo computes its own sequence "
                 "weight from the token ratios; use --ratio-level token", id="vespo-sequence-ratio"),
    pytest.param(GRPO + " --entropy-target 0.5", "--entropy-target has no effect without --adaptive-entropy",
                 id="entropy-target-without-adaptive"),
    pytest.param(GRPO + " --algo gdpo --advantage rloo", "--multi-objective-aggregation "
                 "normalize_then_sum normalises each reward function's scores: it needs --advantage group",
                 id="gdpo-rloo"),
    pytest.param(GRPO + " --algo gdpo --scale-rewards none", "--scale-rewards has no effect without "
                 "--multi-objective-aggregation sum_then_normalize", id="gdpo-scale-rewards"),
    pytest.param(GRPO + " --ref-mixup 1.5", r"--ref-mixup must be in \[0, 1\], got 1.5", id="ref-mixup-above-1"),
    pytest.param(GRPO + " --overlong-buffer 1.0", r"--overlong-buffer must be in \[0, 1\), got 1.0",
                 id="overlong-buffer-1"),
    # an option only one choice reads is a field of that choice's spec (ladder.specs): refused without it
    pytest.param(GRPO + " --ref-mixup 0.5", "--ref-mixup has no effect without --ref-sync-every",
                 id="ref-mixup-without-refresh"),
    pytest.param(GRPO + " --overlong-penalty 2", "--overlong-penalty has no effect without --overlong-buffer",
                 id="overlong-penalty-without-buffer"),
    pytest.param(GRPO + " --max-sampling-rounds 2", "--max-sampling-rounds has no effect without --dynamic-sampling",
                 id="rounds-without-dynamic-sampling"),
    pytest.param(GRPO + " --vespo-k-pos 1 --vespo-k-neg 2", "--vespo-k-pos, --vespo-k-neg have no effect without "
                 "--loss-type vespo", id="vespo-flags-without-vespo"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Paths for the placeholders of the table."""
    root = tmp_path_factory.mktemp("bad-inputs")
    corpus = [r["question"] + " " + r["answer"] for r in ROWS] * 5
    tokenizer = arithmetic.chat_tokenizer(corpus, vocab_size=300)
    torch.manual_seed(0)
    model = tiny_lm.build_model("qwen2", tokenizer, hidden=32, layers=1, heads=2, max_positions=256)
    tiny_lm.save(model, tokenizer, root / "model")
    # The same model with a tokenizer that has no pad token (like GPT-2's).
    tokenizer.pad_token = None
    model.config.pad_token_id = model.generation_config.pad_token_id = None
    tiny_lm.save(model, tokenizer, root / "nopad")

    def jsonl(name, rows):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows))

    jsonl("gsm8k.jsonl", ROWS)
    jsonl("one.jsonl", ROWS[:1])
    jsonl("fields.jsonl", [{"q": r["question"], "a": r["answer"]} for r in ROWS])
    jsonl("long.jsonl", [*ROWS, {"question": "What is 1 + 1? " * 60, "answer": "#### 2"}])
    (root / "empty.jsonl").write_text("")
    (root / "malformed.jsonl").write_text('{"question": "What is 2 + 3?", "answer": \n')
    (root / "rewards.py").write_text(REWARDS)

    reinforce.train(reinforce.Config(out=str(root / "finished"), total_steps=300, progress=False))
    shutil.copytree(root / "finished", root / "interrupted")
    (root / "interrupted" / "summary.json").unlink()
    names = ["model", "nopad", "gsm8k.jsonl", "one.jsonl", "fields.jsonl", "long.jsonl", "empty.jsonl",
             "malformed.jsonl", "rewards.py", "finished", "interrupted"]
    return {name.split(".")[0]: str(root / name) for name in names}


def _cli(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """The command line, offline and with an empty Hugging Face cache."""
    return run_cli(*shlex.split(command), cwd=cwd)  # conftest: offline, this session's own empty cache


def _snapshot(directory: str) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(Path(directory).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command, expected", CASES)
def test_bad_input_is_one_line_and_exit_2(files, tmp_path, command, expected):
    existing = [files[key] for key in ("finished", "interrupted") if "{" + key + "}" in command]
    before = [_snapshot(d) for d in existing]
    if "--out" not in command and "--resume" not in command:
        command += " --out out"
    result = _cli(command.format(**files), tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "error: " in result.stderr, result.stderr
    assert re.search(expected, result.stderr), result.stderr
    assert not (tmp_path / "out").exists(), "the run left its output directory behind"
    assert [_snapshot(d) for d in existing] == before, "an existing run directory was changed"


def test_table_covers_every_kind_of_bad_input():
    assert len(CASES) >= 15
    assert len({case.id for case in CASES}) == len(CASES)


def test_tokenizer_without_pad_token_trains(files, tmp_path):
    """No pad token is not an error: the loader pads with EOS, and a short run finishes."""
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(files["nopad"]).pad_token is None
    result = _cli(GRPO.format(model=files["nopad"], gsm8k=files["gsm8k"]) + " --out out", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["steps"] == 1
    assert len((tmp_path / "out" / "metrics.jsonl").read_text().splitlines()) == 1
