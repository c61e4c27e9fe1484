"""GRPO's design space on tiny models (CPU, seeded): the refreshable π_ref (LoRA, QLoRA, full
fine-tuning) and an exact resume after a refresh, dynamic sampling, the overlong handling, the KL in
the reward, and the ``--algo`` bundles. The combinations that are refused are rows of
tests/test_bad_inputs.py."""

import json
import shutil

import pytest
import torch
from lm_helpers import GSM8K_ROWS, save_tiny_qwen
from safetensors.torch import load_file

import ladder.core
from ladder import core, rewards, run
from ladder.policies import quant
from ladder.policies.causal_lm import REFERENCE_ADAPTER, CausalLMPolicy, completion_mask, lm_batch
from ladder.rungs import grpo, grpo_rollout
from ladder.rungs.grpo_options import ALGOS
from ladder.rungs.grpo_rollout import Rollout
from ladder.runlog import RunLog, without_timings
from ladder.tasks import arithmetic

# Rewards with a spread on a random model (the built-in ones are all 0 there, so nothing would move).
REWARDS = '''
def length(completions, answers):
    return [len(c) / 10 for c in completions]


def parity(completions, answers):
    return [float(len(c) % 2) for c in completions]
'''


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory):
    """A Qwen2-architecture model with a chat template, random weights, saved like a hub snapshot."""
    return save_tiny_qwen(tmp_path_factory.mktemp("tiny-qwen"))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("grpo-variants-data")
    (root / "gsm8k.jsonl").write_text("\n".join(json.dumps(r) for r in GSM8K_ROWS))
    (root / "rewards.py").write_text(REWARDS)
    return {"gsm8k": str(root / "gsm8k.jsonl"), "length": f"{root / 'rewards.py'}:length",
            "parity": f"{root / 'rewards.py'}:parity"}


@pytest.fixture(autouse=True, scope="module")
def one_thread_then_back():
    """The runs use --threads 1 (bit-for-bit repeatable on the CPU; torch's reductions over several
    threads differ in the last bits from run to run), which train() sets for the whole process."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def spy_update(monkeypatch):
    """Every core.update call: (policy, batch, cfg, log π_θ and log π_ref of the batch before the update)."""
    calls = []
    real = ladder.core.update

    def spy(policy, batch, optimizer, cfg, *args, **kwargs):
        before = policy.old_logp_and_values(batch)[0].float()
        calls.append((policy, batch, cfg, before, policy.ref_logp(batch)))
        return real(policy, batch, optimizer, cfg, *args, **kwargs)

    monkeypatch.setattr(ladder.core, "update", spy)
    return calls


@pytest.fixture
def spy_rollouts(monkeypatch):
    """Every rollout grpo.train sampled (before dynamic sampling picks groups)."""
    rollouts = []
    real = grpo.sample

    def spy(*args, **kwargs):
        rollouts.append(real(*args, **kwargs))
        return rollouts[-1]

    monkeypatch.setattr(grpo, "sample", spy)
    return rollouts


def _config(tmp_path, model, dataset, **kw):
    base = dict(model=model, dataset=dataset, steps=2, prompts_per_step=2, group_size=4, max_new_tokens=8,
                eval_size=2, eval_every=0, lr=1e-3, lora=True, out=str(tmp_path / "run"), progress=False,
                print_samples=0, threads=1)
    return grpo.Config(**{**base, **kw})


def _records(out):
    return [json.loads(line) for line in open(f"{out}/metrics.jsonl")]


# ----------------------------------------------------------------------------------------------------------
# 1. π_ref refreshed: a second frozen adapter (LoRA, QLoRA) or the frozen copy (full fine-tuning)


def _policy(tiny_qwen, kind):
    cpu = torch.device("cpu")
    if kind == "full":
        return CausalLMPolicy(quant.load_causal_lm(tiny_qwen, cpu), ref_model=quant.load_causal_lm(tiny_qwen, cpu))
    model = quant.load_causal_lm(tiny_qwen, cpu, qlora=kind == "qlora", lora=kind == "lora",
                                 gradient_checkpointing=kind == "qlora")
    return CausalLMPolicy(model)


def _batch(tiny_qwen):
    tokenizer = quant.load_tokenizer(tiny_qwen)
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, q["question"], "Solve.") for q in GSM8K_ROWS[:3]],
                    return_tensors="pt", padding=True)
    ids, mask = enc.input_ids.repeat_interleave(2, 0), enc.attention_mask.repeat_interleave(2, 0)
    completion = torch.randint(5, len(tokenizer) - 5, (6, 7), generator=torch.Generator().manual_seed(0))
    completion_mask = torch.ones(6, 7)
    completion_mask[1, 4:] = 0  # one shorter completion
    return lm_batch(ids, mask, completion, completion_mask, tokenizer.pad_token_id)


def _reference_and_theta(policy):
    """name → (π_ref's parameter, π_θ's parameter) for every parameter the refresh mixes."""
    if policy.ref_model is not None:
        theta = dict(policy.model.named_parameters())
        return {n: (p, theta[n]) for n, p in policy.ref_model.named_parameters()}
    params = dict(policy.model.named_parameters())
    active = policy.model.active_adapter
    return {n: (p, params[n.replace(f".{REFERENCE_ADAPTER}.", f".{active}.")]) for n, p in params.items()
            if f".{REFERENCE_ADAPTER}." in n}


@torch.no_grad()
def _logp(policy, batch):
    return policy.evaluate(batch)[0]


def _masked_max(x, batch):
    return (x.abs() * batch.mask).max().item()


@pytest.mark.parametrize("kind", ["lora", "qlora", "full"])
def test_reference_refresh_mixes_parameters_and_never_trains(tiny_qwen, kind):
    torch.manual_seed(0)
    policy, batch = _policy(tiny_qwen, kind), _batch(tiny_qwen)
    base_logp = _logp(policy, batch)  # π_θ starts as the base (LoRA's B = 0)
    count = sum(p.numel() for p in policy.parameters())
    trainable = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    n_4bit = sum(type(m).__name__ == "Linear4bit" for m in policy.modules())

    policy.make_reference_refreshable()
    pairs = _reference_and_theta(policy)
    added = sum(p.numel() for p in policy.parameters()) - count
    if kind == "full":
        assert added == 0  # the frozen copy is π_ref as it is
        assert set(pairs) == {n[len("model."):] for n in trainable}
    else:  # one more adapter the size of π_θ's, on the same (not copied) base
        assert added == sum(p.numel() for p in trainable.values()) > 0
        assert len(pairs) == len(trainable) and all(".lora_" in n for n in pairs)
        assert sum(type(m).__name__ == "Linear4bit" for m in policy.modules()) == n_4bit
        assert sorted(policy.model.peft_config) == ["default", REFERENCE_ADAPTER]
    assert not any(ref.requires_grad for ref, _ in pairs.values())
    assert {n for n, p in policy.named_parameters() if p.requires_grad} == set(trainable)
    assert policy.reference_state().keys() == pairs.keys()

    # π_θ trains a few steps (the optimizer built after the refreshable reference, as train() does)
    optimizer = quant.make_optimizer(policy.parameters(), 1e-2, "adamw", torch.device("cpu"))
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert in_optimizer == {id(p) for p in trainable.values()}
    assert not in_optimizer & {id(ref) for ref, _ in pairs.values()}
    start = {n: ref.detach().clone() for n, (ref, _) in pairs.items()}
    for _ in range(3):
        optimizer.zero_grad()
        logp = policy.evaluate(batch)[0]
        (-(logp * batch.mask).sum() / batch.mask.sum()).backward()
        assert all(ref.grad is None for ref, _ in pairs.values())
        optimizer.step()
        policy.ref_logp(batch)  # switching to π_ref's adapter and back changes no requires_grad
        assert not any(ref.requires_grad for ref, _ in pairs.values())
        assert all(p.requires_grad for p in trainable.values())
    assert all(torch.equal(ref, start[n]) for n, (ref, _) in pairs.items())
    theta_logp = _logp(policy, batch)
    assert _masked_max(theta_logp - base_logp, batch) > 1e-2  # π_θ moved
    ref_logp = policy.ref_logp(batch)
    assert _masked_max(ref_logp - base_logp, batch) < 1e-5  # π_ref has not: it is still the base
    if kind != "full":
        with torch.no_grad(), policy.model.disable_adapter():
            disabled = policy.evaluate(batch)[0]
        assert _masked_max(ref_logp - disabled, batch) < 1e-5

    policy.refresh_reference(0.0)  # α = 0: π_ref as it was
    assert all(torch.equal(ref, start[n]) for n, (ref, _) in pairs.items())
    assert torch.equal(policy.ref_logp(batch), ref_logp)

    policy.refresh_reference(0.5)  # α = 1/2: the parameter midpoint
    for n, (ref, theta) in pairs.items():
        assert torch.allclose(ref, (start[n] + theta.detach()) / 2, atol=1e-7, rtol=1e-6), n
    half_logp = policy.ref_logp(batch)
    assert _masked_max(half_logp - ref_logp, batch) > 1e-4

    policy.refresh_reference(1.0)  # α = 1: π_ref = π_θ, KL(π_θ‖π_ref) = 0
    assert all(torch.equal(ref, theta) for ref, theta in pairs.values())
    ref_logp = policy.ref_logp(batch)
    assert _masked_max(ref_logp - theta_logp, batch) < 1e-6
    assert _masked_max(core.kl_estimate(theta_logp, ref_logp, "k3"), batch) < 1e-6
    assert not any(ref.requires_grad for ref, _ in pairs.values())
    assert torch.equal(_logp(policy, batch), theta_logp)  # π_θ untouched by the refresh

    # a checkpoint's reference state puts π_ref back
    saved = policy.reference_state()
    policy.load_reference_state(start)
    assert _masked_max(policy.ref_logp(batch) - base_logp, batch) < 1e-5
    policy.load_reference_state(saved)
    assert torch.equal(policy.ref_logp(batch), ref_logp)


# ----------------------------------------------------------------------------------------------------------
# 2. A run with π_ref refreshes, killed after a checkpoint and resumed, ends where the straight run ends


class Killed(Exception):
    pass


def _args(tiny_qwen, files, out):
    return ["grpo", "--model", tiny_qwen, "--dataset", files["gsm8k"], "--reward-funcs", files["length"],
            "--lora", "--steps", "4", "--prompts-per-step", "2", "--group-size", "4", "--max-new-tokens", "8",
            "--eval-size", "2", "--eval-every", "0", "--lr", "1e-2", "--kl-coef", "0.1", "--ref-sync-every", "2",
            "--checkpoint-every", "3", "--print-samples", "0", "--no-progress", "--threads", "1", "--out", str(out)]


@pytest.fixture(scope="module")
def straight_run(tiny_qwen, files, tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "run"
    assert run.main(_args(tiny_qwen, files, out)) == 0
    return out


def _metrics(out):
    return [without_timings(r) for r in _records(out)]


def _summary(out):
    return {k: v for k, v in json.loads((out / "summary.json").read_text()).items() if k != "wall_s"}


def test_saved_adapter_is_the_trained_one_only(straight_run):
    adapter = straight_run / "adapter"
    assert not [p for p in adapter.iterdir() if p.is_dir()]  # no "ref" subfolder
    weights = load_file(adapter / "adapter_model.safetensors")
    state = torch.load(straight_run / "checkpoint.pt", weights_only=False)
    assert weights and not any(f".{REFERENCE_ADAPTER}." in n for n in weights)
    assert len(weights) == len(state["trainable"]) == len(state["reference"])
    assert all(".default." in n for n in state["trainable"])
    assert all(f".{REFERENCE_ADAPTER}." in n for n in state["reference"])
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 16 and config["peft_type"] == "LORA"


def test_resume_after_a_reference_refresh_equals_the_straight_run(tiny_qwen, files, straight_run, tmp_path,
                                                                   monkeypatch):
    records = _records(straight_run)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert records[0]["kl_ref"] == 0 and records[2]["kl_ref"] > 0  # π_θ moves, π_ref follows it at step 2

    cut = tmp_path / "cut"
    real_save = RunLog.save_checkpoint

    def save_then_die(self, state):
        real_save(self, state)
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(RunLog, "save_checkpoint", save_then_die)
        with pytest.raises(Killed):
            run.main(_args(tiny_qwen, files, cut))
    assert len(_records(cut)) == 3 and not (cut / "summary.json").exists()
    assert _metrics(cut) == _metrics(straight_run)[:3]
    copy = tmp_path / "no-reference"
    shutil.copytree(cut, copy)
    # (--resume of a copied run directory resumes the *saved* --out, the original: point the copy at itself)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "out": str(copy)}))

    assert run.main(["grpo", "--resume", str(cut), "--no-progress"]) == 0
    assert _metrics(cut) == _metrics(straight_run)
    assert _summary(cut) == _summary(straight_run)
    weights, expected = (load_file(out / "adapter" / "adapter_model.safetensors") for out in (cut, straight_run))
    assert weights.keys() == expected.keys()
    assert all(weights[n].equal(expected[n]) for n in expected)

    # The checkpoint's π_ref matters: resumed with π_ref back at the base, step 4 differs.
    monkeypatch.setattr(CausalLMPolicy, "load_reference_state", lambda self, state: None)
    assert run.main(["grpo", "--resume", str(copy), "--no-progress"]) == 0
    assert _metrics(copy)[:3] == _metrics(straight_run)[:3]
    assert _metrics(copy)[3]["kl_ref"] != _metrics(straight_run)[3]["kl_ref"]


# ----------------------------------------------------------------------------------------------------------
# 3. Dynamic sampling


PAD = 0


def _rollout(rewards, tag, G=2, prompt_width=3, completion_width=4):
    """Hand-made groups: every row's tokens, text and question say where it came from."""
    n = len(rewards)
    rows = torch.arange(n)
    prompt_ids = 100 * tag + (rows // G)[:, None].repeat(1, prompt_width) + 1
    completion = 100 * tag + 10 + rows[:, None].repeat(1, completion_width)
    rewards = torch.tensor(rewards, dtype=torch.float32)
    return Rollout(prompt_ids=prompt_ids, prompt_mask=torch.ones(n, prompt_width, dtype=torch.long),
                   completion=completion, mask=torch.ones(n, completion_width), rewards=rewards,
                   per_function={"f": rewards.clone()}, truncated=rows % 2 == 0,
                   texts=[f"{tag}:{i}" for i in range(n)], questions=[f"{tag}:q{i // G}" for i in range(n)])


class Source:
    """sample_more: the prepared rounds in order; records what it was asked."""

    def __init__(self, *rounds):
        self.rounds, self.asked = list(rounds), []

    def __call__(self, wanted):
        self.asked.append(wanted)
        current = self.rounds.pop(0)
        return current if wanted else None


def _single(mine):
    return mine


def _informative(rollout, G=2):
    return grpo_rollout.informative(rollout.rewards, G).tolist()


def _groups(rollout, G=2):
    """(tag, group) of each group, checking that its G rows are adjacent and belong together."""
    out = []
    for g in range(len(rollout) // G):
        questions = rollout.questions[g * G:(g + 1) * G]
        texts = rollout.texts[g * G:(g + 1) * G]
        assert len(set(questions)) == 1, questions
        tag, first = texts[0].split(":")
        assert texts == [f"{tag}:{int(first) + i}" for i in range(G)] and int(first) % G == 0, texts
        out.append((int(tag), int(first) // G))
    return out


def test_dynamic_sampling_keeps_informative_groups_until_it_has_enough():
    first = _rollout([1, 0, 1, 1, 0, 0, 0, 1], tag=1)     # groups 0 and 3 informative
    source = Source(_rollout([2, 2, 0, 0, 1, 1, 1, 1], tag=2),  # none
                    _rollout([0, 1, 1, 0, 1, 1, 2, 3], tag=3),  # 0, 1 and 3: one more than needed
                    _rollout([0, 1] * 4, tag=4))
    rollout, rounds, generated = grpo_rollout.dynamic_sample(first, source, 2, 8, _single, PAD)
    assert (rounds, generated, source.asked) == (3, 24, [True, True])
    assert len(rollout) == len(first) and len(source.rounds) == 1
    assert _groups(rollout) == [(1, 0), (1, 3), (3, 0), (3, 1)]
    assert _informative(rollout) == [True] * 4  # no group without a spread
    assert torch.equal(rollout.rewards, torch.tensor([1., 0., 0., 1., 0., 1., 1., 0.]))
    assert torch.equal(rollout.per_function["f"], rollout.rewards)
    assert rollout.truncated.tolist() == [True, False] * 4
    assert torch.equal(rollout.completion[:, 0], torch.tensor([110, 111, 116, 117, 310, 311, 312, 313]))
    assert torch.equal(rollout.prompt_ids[:, 0], torch.tensor([101, 101, 104, 104, 301, 301, 302, 302]))


def test_dynamic_sampling_stops_at_once_when_every_group_is_informative():
    first = _rollout([0, 1, 1, 0], tag=1)
    source = Source()
    rollout, rounds, generated = grpo_rollout.dynamic_sample(first, source, 2, 4, _single, PAD)
    assert (rounds, generated, source.asked) == (1, 4, [])
    assert _groups(rollout) == [(1, 0), (1, 1)]


def test_dynamic_sampling_at_the_round_cap_fills_with_uninformative_groups():
    first = _rollout([1, 1, 0, 1, 0, 0], tag=1)  # group 1 informative
    source = Source(_rollout([3, 3, 3, 3, 0, 1], tag=2), _rollout([0, 1] * 3, tag=3))
    rollout, rounds, generated = grpo_rollout.dynamic_sample(first, source, 2, 2, _single, PAD)
    assert (rounds, generated, source.asked) == (2, 12, [True])
    assert len(rollout) == len(first)
    # the informative groups first, then the fill: the uninformative ones, in the order they came
    assert _groups(rollout) == [(1, 1), (2, 2), (1, 0)]
    assert _informative(rollout) == [True, True, False]


def test_dynamic_sampling_waits_for_the_other_processes_without_sampling():
    """Done here but not everywhere: further rounds are drawn (same prompt order) but not sampled or counted."""
    first = _rollout([0, 1, 1, 0], tag=1)
    others_done = iter([False, False, True])
    seen = []

    def all_done(mine):
        seen.append(mine)
        return next(others_done)

    source = Source(_rollout([0, 1] * 2, tag=2), _rollout([0, 1] * 2, tag=3))
    rollout, rounds, generated = grpo_rollout.dynamic_sample(first, source, 2, 5, all_done, PAD)
    assert (rounds, generated, source.asked, seen) == (3, 4, [False, False], [True, True, True])
    assert _groups(rollout) == [(1, 0), (1, 1)]


def test_rounds_of_different_widths_concatenate_with_left_padded_prompts_and_right_padded_completions():
    first = _rollout([1, 1, 0, 1], tag=1, prompt_width=3, completion_width=4)
    more = _rollout([0, 1, 2, 2], tag=2, prompt_width=5, completion_width=2)
    rollout, _, _ = grpo_rollout.dynamic_sample(first, Source(more), 2, 4, _single, PAD)
    assert _groups(rollout) == [(1, 1), (2, 0)]
    assert rollout.prompt_ids.shape == (4, 5) and rollout.completion.shape == (4, 4)
    assert rollout.prompt_ids[:2].tolist() == [[PAD, PAD, 102, 102, 102]] * 2
    assert rollout.prompt_mask[:2].tolist() == [[0, 0, 1, 1, 1]] * 2
    assert rollout.prompt_mask[2:].tolist() == [[1] * 5] * 2
    assert rollout.completion[2:].tolist() == [[210, 210, PAD, PAD], [211, 211, PAD, PAD]]
    assert rollout.mask[2:].tolist() == [[1, 1, 0, 0]] * 2
    assert rollout.completion[:2].tolist() == [[112] * 4, [113] * 4] and rollout.mask[:2].eq(1).all()

    joined = grpo_rollout.concat([first, more], PAD)
    assert len(joined) == 8 and joined.texts == first.texts + more.texts
    assert torch.equal(joined.prompt_ids[4:], more.prompt_ids) and torch.equal(joined.mask[:4], first.mask)
    assert torch.equal(joined.rewards, torch.cat([first.rewards, more.rewards]))


def test_train_with_dynamic_sampling_updates_on_informative_groups(tmp_path, tiny_qwen, files, spy_update):
    P, G, cap = 2, 2, 3
    grpo.train(_config(tmp_path, tiny_qwen, files["gsm8k"], steps=4, prompts_per_step=P, group_size=G,
                       reward_funcs=files["parity"], dynamic_sampling=True, max_sampling_rounds=cap, kl_coef=0.0))
    records = _records(tmp_path / "run")
    assert len(spy_update) == 4 and all(len(batch) == P * G for _, batch, *_ in spy_update)
    for r in records:
        assert 1 <= r["sampling/rounds"] <= cap
        assert r["sampling/completions"] == P * G * r["sampling/rounds"] >= P * G
        if r["sampling/rounds"] < cap:
            assert r["frac_reward_zero_std"] == 0
    assert [r["completions_total"] for r in records] == list(
        torch.tensor([r["sampling/completions"] for r in records]).cumsum(0).tolist())
    assert any(r["sampling/rounds"] > 1 for r in records)  # it had to sample more at least once
    assert any(r["sampling/rounds"] < cap for r in records)


# ----------------------------------------------------------------------------------------------------------
# 4. Overlong: the soft penalty, and truncated completions masked out of the loss


def test_overlong_penalty_by_hand():
    lengths = torch.arange(0, 11)
    penalty = rewards.overlong_penalty(lengths, max_tokens=10, buffer=4, penalty=2.0)
    expected = [0.0] * 7 + [-0.5, -1.0, -1.5, -2.0]  # 0 up to L_max − L_buf = 6, then linear to −p at 10
    assert penalty.tolist() == pytest.approx(expected)
    assert rewards.overlong_penalty(torch.tensor([12]), 10, 4, 2.0).tolist() == [-2.0]  # not beyond −p
    assert rewards.overlong_penalty(torch.tensor([9, 10]), 10, 1).tolist() == [0.0, -1.0]


def test_truncated_completions_take_no_part_in_the_loss(tmp_path, tiny_qwen, files, monkeypatch, spy_update,
                                                         spy_rollouts):
    """EOS is suppressed (min = max new tokens), then put back by hand in some rows: row 0 of a group stops
    after 2 tokens, row 3 ends with EOS exactly at --max-new-tokens; rows 1 and 2 are truncated."""
    T, G = 4, 4
    real_generate = CausalLMPolicy.generate
    eos = quant.load_tokenizer(tiny_qwen).eos_token_id

    def generate(self, *args, **kwargs):
        completion, _ = real_generate(self, *args, **kwargs)
        if kwargs.get("do_sample", True):
            assert completion.shape[1] == T and not (completion == eos).any()
            completion = completion.clone()
            completion[0::G, 1] = eos
            completion[3::G, T - 1] = eos
        return completion, completion_mask(completion, eos)

    monkeypatch.setattr(CausalLMPolicy, "generate", generate)
    grpo.train(_config(tmp_path, tiny_qwen, files["gsm8k"], steps=1, group_size=G, max_new_tokens=T,
                       min_new_tokens=T, mask_truncated=True, overlong_buffer=0.5, overlong_penalty=1.0,
                       reward_funcs=files["length"]))
    (rollout,), ((_, batch, *_),) = spy_rollouts, spy_update
    truncated = torch.tensor([False, True, True, False] * 2)
    assert torch.equal(rollout.truncated, truncated)
    lengths = rollout.mask.sum(1)
    assert lengths.tolist() == [2, 4, 4, 4] * 2
    penalty = rewards.overlong_penalty(lengths, T, 2, 1.0)  # round(0.5 · 4) = 2 tokens of buffer
    assert penalty.tolist() == [0.0, -1.0, -1.0, -1.0] * 2
    assert torch.equal(rollout.per_function["overlong"], penalty)
    assert torch.allclose(rollout.rewards, rollout.per_function["length"] + penalty)

    advantages = core.group_relative(rollout.rewards, G, "group")  # from every row, the truncated ones too
    assert advantages[~truncated].abs().min() > 0
    assert batch.mask[truncated].eq(0).all() and batch.advantages[truncated].eq(0).all()
    assert torch.equal(batch.mask[~truncated], rollout.mask[~truncated])
    assert torch.allclose(batch.advantages[~truncated], advantages[~truncated, None] * rollout.mask[~truncated])
    record = _records(tmp_path / "run")[0]
    assert record["completions/clipped_ratio"] == 0.5
    assert record["rewards/overlong/mean"] == pytest.approx(-0.75)


# ----------------------------------------------------------------------------------------------------------
# 5. KL in the reward


@pytest.mark.parametrize("advantage, scale, estimator", [("rloo", "none", "k1"), ("group", "group", "k3")])
def test_kl_in_the_reward_shapes_the_advantages_not_the_loss(tmp_path, tiny_qwen, files, spy_update, spy_rollouts,
                                                               advantage, scale, estimator):
    beta, G = 0.5, 4
    grpo.train(_config(tmp_path, tiny_qwen, files["gsm8k"], steps=2, group_size=G, lr=1e-2, kl_coef=beta,
                       kl_in="reward", kl_estimator=estimator, advantage=advantage, scale_rewards=scale,
                       reward_funcs=files["length"]))
    records = _records(tmp_path / "run")
    assert len(spy_update) == 2 == len(spy_rollouts)
    for (_, batch, cfg, before, ref), rollout, record in zip(spy_update, spy_rollouts, records):
        assert cfg.kl_coef == 0  # no KL term in the loss
        assert batch.old_logp is not None and batch.ref_logp is not None
        assert torch.equal(batch.old_logp, before)  # π_old: taken before the update
        assert torch.equal(batch.ref_logp, ref)
        kl = (core.kl_estimate(before, ref, estimator) * rollout.mask).sum(1)
        shaped = rollout.rewards - beta * kl
        expected = (core.leave_one_out(shaped, G, scale) if advantage == "rloo"
                    else core.group_relative(shaped, G, scale))
        assert torch.allclose(batch.advantages, expected[:, None] * rollout.mask, atol=1e-5)
        assert record["reward_shaped"] == pytest.approx(shaped.mean().item(), abs=1e-6)
    kl = (core.kl_estimate(spy_update[1][3], spy_update[1][4], estimator) * spy_rollouts[1].mask).sum(1)
    assert kl.abs().max() > 1e-3  # by the second update π_θ has left π_ref: the shaping is not a no-op
    unshaped = (core.leave_one_out(spy_rollouts[1].rewards, G, scale) if advantage == "rloo"
                else core.group_relative(spy_rollouts[1].rewards, G, scale))
    assert (spy_update[1][1].advantages[:, 0] - unshaped).abs().max() > 1e-3


# ----------------------------------------------------------------------------------------------------------
# 6. --algo bundles


@pytest.mark.parametrize("name", list(ALGOS))
def test_algo_sets_its_flags(name):
    cfg = run.make_config("grpo", grpo, ["--algo", name])
    assert {k: getattr(cfg, k) for k in ALGOS[name]} == ALGOS[name]
    grpo.validate(cfg)  # every bundle is a valid combination


def test_algo_applies_over_the_preset_and_explicit_flags_win():
    cfg = run.make_config("grpo", grpo, ["--preset", "tiny", "--algo", "dapo"])
    assert cfg.kl_coef == 0 and cfg.dynamic_sampling and cfg.clip_eps_high == 0.28
    assert cfg.model == "@tiny-math" and cfg.lr == 1e-3  # the rest of the preset stays
    cfg = run.make_config("grpo", grpo, ["--algo", "gspo", "--clip-eps-low", "0.1"])
    assert cfg.clip_eps_low == 0.1 and cfg.clip_eps_high == 4e-4 and cfg.ratio_level == "sequence"
    cfg = run.make_config("grpo", grpo, ["--preset", "tiny", "--algo", "dapo", "--kl-coef", "0.02",
                                         "--no-dynamic-sampling"])
    assert cfg.kl_coef == 0.02 and not cfg.dynamic_sampling and cfg.mask_truncated


def test_unknown_algo_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run.main(["grpo", "--algo", "ppo", "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "--algo" in err and "'ppo'" in err and "dapo" in err
    assert not (tmp_path / "out").exists()
