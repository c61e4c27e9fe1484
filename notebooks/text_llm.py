# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebooks 4–5: PPO for RLHF on sentiment, GRPO with QLoRA.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_toy import SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["4_ppo_rlhf_sentiment"] = [
    r"""md:# 4 · PPO for RLHF: GPT-2 learns to write positive reviews

Now an action is a token and a trajectory a completion. A reward model scores the whole completion once;
the KL to $\pi_{\text{ref}}$ (the model before RL) goes **into the per-token reward**:

$$r_t = -\beta\,\mathrm{KL}_t + [t = T]\cdot \text{score}, \qquad \mathrm{KL}_t = \log\pi_{\text{old}}(a_t) - \log\pi_{\text{ref}}(a_t)$$

(`core.kl_penalized_rewards`). A **value head** on the same transformer predicts $V(s_t)$ at every token,
**GAE over tokens** turns the rewards into advantages, and $\mu$ passes of the clipped surrogate follow —
`core.update`, exactly as on CartPole.

## Adaptive $\beta$ (Ziegler et al. 2019)

$$e = \operatorname{clip}\Big(\frac{\mathrm{KL}}{\mathrm{KL}_{\text{target}}} - 1, -0.2, 0.2\Big), \qquad \beta \leftarrow \beta\,(1 + e\, n/H)$$

after every update, where $\mathrm{KL}$ is the batch's mean per-completion KL $\sum_t \mathrm{KL}_t$, $\mathrm{KL}_{\text{target}}$ is
`--kl-target`, $n$ the number of completions in the batch (`--batch-size`: the controller is updated with the batch
size) and $H$ the horizon `--kl-horizon`, counted in completions. $e$ is the relative error, capped at ±20 %, and each
update applies the fraction $n/H$ of it: too much KL raises $\beta$, too little lowers it, over about $H$ completions
(`core.AdaptiveKLController`).""",
    SETUP,
    """scores = torch.tensor([1.0, -0.5])
logp = torch.tensor([[-1.0, -2.0, -0.5], [-1.5, -0.3, 0.0]])
ref_logp = torch.tensor([[-1.2, -2.5, -0.4], [-1.5, -0.9, 0.0]])
mask = torch.tensor([[1., 1., 1.], [1., 1., 0.]])
rewards, kl = core.kl_penalized_rewards(scores, logp, ref_logp, mask, kl_coef=0.2)
rewards""",
    r"""md:**Exercise:** `exercises/ex09_kl_rewards.py` builds these rewards; once it passes,
`python -m ladder.run ppo-sentiment --preset tiny --use-exercises` trains with your version.""",
    r"""md:## Run it

`USE_GPU = False` runs the **tiny preset** for a few updates: a tiny GPT-2 that ladder builds and caches,
bundled review openings, VADER as the reward model — offline, on a CPU. On a GPU set `USE_GPU = True`
for the real thing (`lvwerra/gpt2-imdb`, `lvwerra/distilbert-imdb`, IMDB), the same as

```bash
python -m ladder.run ppo-sentiment --device cuda
```""",
    """from ladder.rungs import ppo_sentiment

USE_GPU = False
if USE_GPU:
    cfg = ppo_sentiment.Config(device="cuda", out=str(RUNS / "sentiment"))
else:
    cfg = ppo_sentiment.Config(**{**ppo_sentiment.PRESETS["tiny"], "steps": 4, "batch_size": 16,
                                  "num_eval_prompts": 4, "print_samples": 0}, out=str(RUNS / "sentiment"),
                               progress=False)
summary = ppo_sentiment.train(cfg)
{k: summary[k] for k in ("updates", "score_first", "score_last", "kl_final", "kl_coef_final")}""",
    """display(Markdown((RUNS / "sentiment" / "samples.md").read_text()))""",
    """[{k: round(r[k], 4) for k in ("score_mean", "kl_ref", "kl_coef", "clip_frac")} for r in metrics(RUNS / "sentiment")]""",
    """display(Image(filename=str(RUNS / "sentiment" / "curves.png")))""",
    r"""md:## Reward vs KL: what $\beta$ buys

Every RLHF run walks a path in the (KL, score) plane: the reward model's score goes up as the policy moves
away from $\pi_{\text{ref}}$. $\beta$ is the price of that distance. PPO maximises, per completion,

$$\text{score} - \beta \sum_t \mathrm{KL}_t ,$$

so a large $\beta$ stops the walk early (close to $\pi_{\text{ref}}$, a modest score) and $\beta = 0$ lets it run as
far as the reward model pays — which is where **reward hacking** lives: the reward model is only a proxy,
and nothing keeps the text fluent once it has found what the proxy likes.

The widget below trains the tiny preset once for each $\beta$, **fixed** (`adaptive_kl=False`, so each run pays the
same price all along), 30 updates of 32 completions each — about ten seconds per run, once; the runs are
cached. Pick a $\beta$ to highlight it and to see its completions before and after training (same prompts, same
sampling seed); slide *updates* to read the curves part of the way. Curves are means over the last 5 updates.""",
    """view = viz.kl_tradeoff_view(betas=(0.0, 0.2, 1.0), steps=30)
view""",
    """for beta, run in view.data["runs"].items():
    print(f"β = {beta:<4}: score {run['score_end']:+.2f}   KL {run['kl_end']:6.2f}   score − β·KL {run['reward_end']:+.2f}")""",
    """view.controls["beta"].value = 0.0     # the β = 0 run: its completions now sit under the plot
[(s["after"], s["after_score"]) for s in view.data["samples"]]""",
    r"""md:With $\beta = 0$ the score is near its maximum, and the text is no longer a review: the policy found what
VADER likes and repeats it. With $\beta = 1$ the policy hardly moves. In between, the score rises while the KL stays modest — the
trade-off PPO-RLHF is tuned for. The adaptive controller (the default, `--kl-target`) picks $\beta$ for you by
steering the KL towards a target instead.""",
]

NOTEBOOKS["5_grpo_qlora"] = [
    r"""md:# 5 · GRPO with QLoRA

## Dropping the critic

A value head as big as the policy is expensive. GRPO (DeepSeekMath) samples $G$ completions per
prompt and uses the group as the baseline:

$$\hat A_i = \frac{r_i - \operatorname{mean}(r_1,\dots,r_G)}{\operatorname{std}(r_1,\dots,r_G) + \epsilon}$$

every token of completion $i$ shares $\hat A_i$ (`core.group_relative`). `--scale-rewards` picks the
denominator: the group's std (`group`), the batch's (`batch`), or none at all (`none`, Dr. GRPO, which
argues the std over-weights easy and impossible prompts). A group whose rewards are all equal has no
signal: $\hat A = 0$.

## Rule rewards

No reward model: a completion earns 1 for the right final answer and a bonus for the expected format
(`ladder.tasks.arithmetic`).""",
    SETUP,
    """view = viz.group_advantages_view("1, 0, 0, 0,  1, 1, 1, 0,  1, 1, 1, 1", group_size=4)
view""",
    r"""md:## KL in the loss, and how the loss is averaged

GRPO puts the KL into the loss, not the reward, so that its gradient is the gradient of the KL itself, token by
token, rather than a sequence-level reward term that every token of the completion shares. Both are options of the
rung: `--kl-in loss` (GRPO) or `--kl-in reward` (RLOO: $\beta\sum_t \mathrm{KL}_t$ comes off each completion's reward);
notebook 6 §4 computes which estimator's gradient is the gradient of which KL. In the loss the KL is estimated
with $k_3$ and importance-corrected when $\mu > 1$ (notebook 3):

$$L = \operatorname{agg}\Big(-\min(r_t\hat A_t, \operatorname{clip}(r_t)\hat A_t) + \beta\,\tfrac{\pi_\theta}{\pi_{\text{old}}}k_3\Big)$$

`--loss-type` chooses $\operatorname{agg}$ (a mode of `core.aggregate`): `grpo` averages tokens within each
sequence, then sequences (`seq_mean_token_mean`); `bnpo` averages all tokens (`token_mean`); `dr_grpo` and
`dapo` divide the sum by a constant the rung computes (`sum_over_constant`): $B\cdot L_{\max}$, the
generation budget (`max_new_tokens` per completion), or the batch's token count. Long and short
completions weigh differently:""",
    """per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [3.0, 0.0, 0.0, 0.0]])
mask = torch.tensor([[1., 1., 1., 1.], [1., 0., 0., 0.]])   # a long and a short completion
modes = {"grpo": ("seq_mean_token_mean", None), "bnpo": ("token_mean", None),   # --loss-type → mode, constant
         "dr_grpo": ("sum_over_constant", 2 * 8), "dapo": ("sum_over_constant", 5)}  # B · L_max (L_max = 8); tokens
{loss_type: round(core.aggregate(per_token, mask, mode, num_tokens).item(), 3)
 for loss_type, (mode, num_tokens) in modes.items()}""",
    r"""md:## Memory: 4-bit + LoRA + the disabled adapter

`--qlora` loads the base model in 4-bit NF4 (double quantisation), trains only small LoRA adapters, and
gets $\pi_{\text{ref}}$ for free: the reference log-probs are the same model with the adapter **disabled**
— no second copy of the weights. Gradient checkpointing trades compute for activation memory.

## Run it: a few steps of the tiny preset

The tiny preset (a tiny instruct model ladder builds and caches on first use — about a minute —
and synthetic two-digit addition) runs on a CPU, 4-bit included. Two steps here; the reward is the
correctness reward plus the format reward, so a right, well-formatted answer earns 2.
A group whose $G$ rewards are all equal has $\hat A = 0$ and, with $\pi_\theta = \pi_{\text{ref}}$ at the start, the
$k_3$ term has zero gradient too: nothing moves. `frac_reward_zero_std` counts those groups; early in
training (or on problems that are too hard) it is often 1.
On a GPU, the real run is

```bash
python -m ladder.run grpo --qlora --device cuda        # Qwen2.5-0.5B-Instruct on GSM8K
```""",
    """from ladder.rungs import grpo

USE_GPU = False
short = {"steps": 2, "eval_size": 8, "eval_every": 0, "print_samples": 0}
base = {"device": "cuda"} if USE_GPU else {**grpo.PRESETS["tiny"], **short}
summary = grpo.train(grpo.Config(**base, qlora=True, out=str(RUNS / "grpo"), progress=False))
for r in metrics(RUNS / "grpo"):
    print(f"step {r['step']}: " + "  ".join(f"{k} {r[k]:.4f}" for k in ("reward", "frac_reward_zero_std", "clip_frac", "kl_ref")))""",
    r"""md:The accuracy of two steps means nothing; the full tiny run is `python -m ladder.run grpo --qlora --preset tiny`
(and `python -m ladder.run eval --preset tiny --adapter runs/grpo-seed0/adapter` evaluates the adapter).

## What $\mu$ does on the LM

Notebook 3's experiment, on the language model. The three policies of the tiny QLoRA preset:

* $\pi_{\text{ref}}$ — the 4-bit base with the LoRA adapter **disabled**;
* $\pi_{\text{old}}$ — the same model after 8 ordinary GRPO updates (`grpo.grpo_step`); it samples one fixed batch
  of 8 prompts × 8 completions (about 1,700 completion tokens);
* $\pi_\theta$ — a copy of $\pi_{\text{old}}$'s adapter, given $\mu$ passes of `core.update` with the GRPO loss
  (clipped surrogate $+\ \beta\,\frac{\pi_\theta}{\pi_{\text{old}}} k_3$, $\beta = 0.04$).

The tiny model's vocabulary has a few hundred tokens, so every KL is also computed **exactly** at each visited
position $s_t$: $\sum_v \pi_\theta(v\mid s_t)\log\frac{\pi_\theta(v\mid s_t)}{\pi_x(v\mid s_t)}$. The GRPO loss instead sees one
sampled token $c_t \sim \pi_{\text{old}}$ per position. Over fresh samples at the same positions, the corrected estimate
averages to the exact KL:

$$\mathbb{E}_{c\sim\pi_{\text{old}}}\Big[\frac{\pi_\theta(c)}{\pi_{\text{old}}(c)}k_3(c)\Big] = \sum_v \pi_\theta(v)\,k_3(v) = \mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}}),
\qquad \mathbb{E}_{c\sim\pi_{\text{old}}}[k_3(c)] = \sum_v \pi_{\text{old}}(v)\,k_3(v) \neq \mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$$

and the shaded bands show mean ± std of each estimate over such fresh samples. Building $\pi_{\text{old}}$ and the batch
takes about 15 seconds, once; each setting of the sliders then costs well under a second per pass (CPU).""",
    """view = viz.lm_mu_view(mu=4, lr=3e-4, clip_eps=0.2)
view""",
    """for mu in (1, 2, 4, 8):
    run = viz.lm_mu_passes(mu, lr=3e-4)
    print(f"μ={mu}: ratio std {run['ratios'][-1].std():.3f}  clip {run['clip_frac_after'][-1]:.3f}  "
          f"KL(θ‖old) {run['kl_old_exact'][-1]:.4f}  KL(θ‖ref) exact {run['kl_ref_exact'][-1]:.4f}  "
          f"biased {run['kl_ref_biased'][-1]:.4f}  corrected {run['kl_ref_corrected'][-1]:.4f}")""",
    r"""md:As on CartPole, each pass spreads the ratios, the clip switches off more tokens, and KL$(\pi_\theta\,\|\,\pi_{\text{old}})$
grows. Most tokens of a worked sum are nearly certain, so most ratios stay at 1 and the action is in a few
hundred tokens (the histogram is on a log scale) — and in half the groups all $G$ answers scored the same,
so their $\hat A = 0$ and only the KL term moves them. The plain $k_3$ average drifts away from the exact KL as
$\mu$ grows; the corrected one's band is centred on it, but one batch's value is noisy — a few positions, and
tokens $\pi_{\text{old}}$ seldom samples, carry much of the KL. Try the preset's learning rate `1e-3`: Adam's first steps are large, the plain
estimate overshoots several-fold, and the corrected band widens.

**Exercises:** `ex10_group_relative.py` and `ex11_aggregate.py`; then
`python -m ladder.run grpo --preset tiny --use-exercises` trains with your `group_relative` and `aggregate`.""",
]
