# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebooks 4–5: PPO for RLHF on sentiment, GRPO with QLoRA.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_sampler import CELLS as SAMPLER_CELLS
from text_toy import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["4_ppo_rlhf_sentiment"] = [
    r"""md:# 4 · PPO for RLHF: GPT-2 learns to write positive reviews

After this notebook (about 45 minutes, on a CPU) you will be able to:

* write down RLHF-PPO's per-token reward $r_t = -\beta\,\mathrm{KL}_t + [t = T-1]\cdot\text{score}$ and say which policy each log-prob comes from;
* take one real completion through GAE token by token and explain why a token's advantage sees the KL penalties of later tokens, never of earlier ones;
* read a β sweep: how the price of the KL trades reward-model score against distance to $\pi_{\text{ref}}$, and what reward hacking looks like.

Now an action is a token $a_t$ and a trajectory a completion of $T$ tokens $a_0,\dots,a_{T-1}$. A reward model scores the
whole completion once;
the KL to $\pi_{\text{ref}}$ (the model before RL) goes **into the per-token reward**:

$$r_t = -\beta\,\mathrm{KL}_t + [t = T-1]\cdot \text{score}, \qquad \mathrm{KL}_t = \log\pi_{\text{old}}(a_t) - \log\pi_{\text{ref}}(a_t)$$

(`core.kl_penalized_rewards`, the $k_1$ estimate on $\pi_{\text{old}}$, the policy that sampled the batch; $\pi_\theta = \pi_{\text{old}}$
until the first optimiser step of the update). A **value head** on the same transformer predicts $V(s_t)$ at every token,
**GAE over tokens** turns the rewards into advantages, and $\mu$ passes of the clipped surrogate follow —
`core.update`, exactly as on CartPole.

**Notation.** The ratio is $r_t(\theta) = \pi_\theta(a_t\mid s_t)/\pi_{\text{old}}(a_t\mid s_t)$ — notebook 2's ratio — and from
here on it is always written with its $(\theta)$, because $r_t$ without it is token $t$'s reward.

## Adaptive $\beta$ (Ziegler et al. 2019)

$$e = \operatorname{clip}\Big(\frac{\mathrm{KL}}{\mathrm{KL}_{\text{target}}} - 1, -0.2, 0.2\Big), \qquad \beta \leftarrow \beta\,(1 + e\, n/H)$$

after every update, where $\mathrm{KL}$ is the batch's mean per-completion KL $\sum_t \mathrm{KL}_t$, $\mathrm{KL}_{\text{target}}$ is
`--kl-target`, $n$ the number of completions in the batch (`--batch-size`: the controller is updated with the batch
size) and $H$ the horizon `--kl-horizon`, counted in completions. $e$ is the relative error, capped at ±20 %, and each
update applies the fraction $n/H$ of it: too much KL raises $\beta$, too little lowers it, over about $H$ completions
(`core.AdaptiveKLController`).

Two completions, of 3 and 2 tokens, with $\beta = 0.2$:""",
    SETUP,
    """scores = torch.tensor([1.0, -0.5])
old_logp = torch.tensor([[-1.0, -2.0, -0.5], [-1.5, -0.3, 0.0]])    # log π_old(a_t)
ref_logp = torch.tensor([[-1.2, -2.5, -0.4], [-1.5, -0.9, 0.0]])
mask = torch.tensor([[1., 1., 1.], [1., 1., 0.]])
rewards, kl = core.kl_penalized_rewards(scores, old_logp, ref_logp, mask, kl_coef=0.2)
rewards""",
    r"""md:**Exercise:** `exercises/ex09_kl_rewards.py` builds these rewards; once it passes,
`python -m ladder.run ppo-sentiment --preset tiny --use-exercises` trains with your version.""",
    r"""md:## Run it

`USE_GPU = False` runs the **tiny preset** for a few updates: a tiny GPT-2 that ladder built and ships,
bundled review openings, VADER as the reward model — offline, on a CPU. On a GPU set `USE_GPU = True`
for the real thing (`lvwerra/gpt2-imdb`, `lvwerra/distilbert-imdb`, IMDB), the same as

```bash
python -m ladder.run ppo-sentiment --device cuda
```

The run reports two different scores: the **training batches'** mean score (fresh prompts drawn for each update:
`score_mean` in `metrics.jsonl`), and the mean over a few **fixed prompts** sampled with a fixed seed before and after
training (the table's **mean** row).""",
    """from ladder.rungs import ppo_sentiment
from ladder.viz import lm_lab, lm_tokens, lm_views

USE_GPU = False
if USE_GPU:
    cfg = ppo_sentiment.Config(device="cuda", out=str(RUNS / "notebook-4-sentiment"))
else:
    cfg = ppo_sentiment.Config(**{**ppo_sentiment.PRESETS["tiny"], "steps": 4, "batch_size": 16,
                                  "num_eval_prompts": 4, "print_samples": 0}, out=str(RUNS / "notebook-4-sentiment"),
                               progress=False)
with lm_lab.quiet_run():                    # the rung prints the table below; it is shown once, rendered
    summary = ppo_sentiment.train(cfg)
print(f"training batches ({cfg.batch_size} fresh prompts each): mean score {summary['score_first']:+.3f} "
      f"at update 1, {summary['score_last']:+.3f} at update {summary['updates']}")
print(f"the {len(summary['samples'])} fixed prompts of the table: mean score {summary['eval_score_before']:+.3f} "
      f"before training, {summary['eval_score_after']:+.3f} after")
display(Markdown((RUNS / "notebook-4-sentiment" / "samples.md").read_text()))""",
    """for r in metrics(RUNS / "notebook-4-sentiment"):
    print(f"update {r['step']}: score {r['score_mean']:+.4f}  KL {r['kl_ref']:.4f}  β {r['kl_coef']:.4f}  "
          f"clip fraction {r['clip_frac']:.4f}")
display(Image(data=lm_views.learning_curves(metrics(RUNS / "notebook-4-sentiment"))))""",
    r"""md:## Token log-probs: the one-position shift

Every number above starts as $\log\pi(a_t)$ of a completion token. A causal LM's output $z_i$ at position $i$ is a
distribution over the token at position $i+1$, and the policy that sampled is the softmax of $z/\tau$ (`generate`
divides by the temperature $\tau$ before it samples). With the prompt's last position at $P-1$:

$$\log\pi(a_t) = \log\operatorname{softmax}\big(z_{P-1+t}/\tau\big)[a_t] = z_{P-1+t,\,a_t}/\tau - \log\sum_v e^{z_{P-1+t,\,v}/\tau},$$

and 0 on padding — `core.token_logp`. The policy calls it on chunks of positions (and shares each prompt's forward
pass), so the full $[B, P+T, V]$ logits never sit in memory; computed on the whole logits at once, it gives the same
numbers:""",
    """demo = lm_tokens.token_logps()
print(f"logits {demo['logits_shape']} = [B, P + T, V]: prompts of P = {demo['prompt_len']}, "
      f"completions of T = {demo['completion_len']}, τ = {demo['temperature']}")
print(f"max |full − policy.evaluate| = {demo['max_abs_diff']:.2e}")
print("first completion:", "  ".join(f"{tok!r} {lp:.2f}" for tok, lp in demo["first_row"][:6]))""",
    r"""md:**Exercise:** `exercises/ex16_token_logp.py` writes `token_logp`; with it, every log-prob an LM rung uses is yours.

## From per-token rewards to advantages: GAE over the completion

A completion of $T$ tokens $a_0,\dots,a_{T-1}$ is an episode that ends at its last real token: `dones` is
`core.last_step_mask(mask)`, so there is no bootstrap past it ($V_T = 0$; padding never enters). `core.gae` computes
(`core.masked_gae` is exactly this, with the padding zeroed — exercise 19)

$$\delta_t = r_t + \gamma V_{t+1} - V_t, \qquad \hat A_t = \delta_t + \gamma\lambda\,\hat A_{t+1}, \qquad R_t = \hat A_t + V_t ,$$

backwards from $t = T-1$, where $\hat A_{T-1} = \delta_{T-1} = r_{T-1} - V_{T-1}$. Unrolled, $\hat A_t = \sum_{k \ge 0}(\gamma\lambda)^k\,\delta_{t+k}$.
With $\lambda = 1$ the values telescope, $\sum_{k}\gamma^k(\gamma V_{t+k+1} - V_{t+k}) = \gamma^{T-t}V_T - V_t = -V_t$, and

$$\hat A_t = \sum_{t' \ge t}\gamma^{t'-t} r_{t'} - V_t = \gamma^{T-1-t}\,\text{score} - \beta\sum_{t' \ge t}\gamma^{t'-t}\,\mathrm{KL}_{t'} - V_t ,
\qquad \text{so with } \gamma = \lambda = 1:\quad \hat A_0 = \sum_t r_t - V_0 .$$

Each token's advantage is the score and the KL penalties **from itself on**, minus its value baseline. The penalties of
later tokens reach earlier ones, not the other way round: choosing $a_t$ changes the prefix every later token is
sampled from, so their KL and the score are consequences of $a_t$; the tokens before $a_t$ were written before it was
chosen, and their penalties are paid whatever $a_t$ is — in $\hat A_t$ they would only add noise. $\lambda < 1$ (the
preset's $\lambda = 0.95$, $\gamma = 1$) trusts the critic more: far rewards are replaced by $V$'s estimate of them; at
$\lambda = 0$, $\hat A_t = \delta_t$ and the score reaches token $t < T-1$ only through $V_{t+1}$. Last, the rung **whitens**
$\hat A$ over the real tokens of the whole batch (`core.whiten`): the sign of a token's advantage is relative to the
batch; $R_t$ (before whitening) is the value target.

Real numbers: the rung's own policy after 10 updates at a fixed $\beta = 0.2$ (so that $\pi_{\text{old}} \neq \pi_{\text{ref}}$ and the
value head has learnt something) samples 16 completions; one of them, through `lm_tokens.token_table`
(`core.kl_penalized_rewards`, `core.gae`, `core.last_step_mask`, `core.whiten`, as in `ppo_sentiment.ppo_targets`):""",
    """batch = lm_tokens.ppo_batch(updates=10, kl_coef=0.2, batch_size=16)   # about 15 s, once
row = 0
table = lm_tokens.token_table(batch, row)                                # the preset's γ = 1, λ = 0.95
print(f"{batch.texts[row]!r}: score {table['score']:+.4f}, β = {table['kl_coef']}, "
      f"γ = {table['gamma']}, λ = {table['lam']}")
display(Markdown(lm_tokens.token_table_markdown(table)))""",
    r"""md:The score sits on the last real token (the end-of-text token where the completion stopped itself, else the last
token `max_new_tokens` allowed). One token's
$k_1$ can be negative — $\pi_{\text{old}}$ gave it less probability than $\pi_{\text{ref}}$ — only its expectation over
$a_t \sim \pi_{\text{old}}$ is a KL, $\ge 0$. The identity, on the same completion with $\gamma = \lambda = 1$:""",
    """exact = lm_tokens.token_table(batch, row, gamma=1.0, lam=1.0)
A0, sum_r, V0 = exact["advantage"][0], sum(exact["reward"]), exact["value"][0]
print(f"γ = λ = 1:  Â_0 = {A0:+.4f}   Σ_t r_t − V_0 = {sum_r:+.4f} − ({V0:+.4f}) = {sum_r - V0:+.4f}")
print(f"γ = 1, λ = 0.95 (the preset):  Â_0 = {table['advantage'][0]:+.4f}")""",
    r"""md:**Predict first.** In the widget below, slide λ from 0.95 down to 0. What happens to $\hat A_0$, the first token's
advantage — and to $\hat A$ of the last token?""",
    """gae_view = lm_views.gae_tokens_view(row=row)
gae_view""",
    """for lam in (1.0, 0.95, 0.0):
    t = lm_tokens.token_table(batch, row, gamma=1.0, lam=lam)
    print(f"λ = {lam:<4}:  Â_0 = {t['advantage'][0]:+.4f}   Â_last = {t['advantage'][-1]:+.4f}")""",
    r"""md:<details><summary>Answer</summary>

$\hat A_0$ moves from the preset's λ = 0.95 value to the one-step $\delta_0 = r_0 + \gamma V_1 - V_0$
at $\lambda = 0$ (at λ = 1 it is the whole sum of rewards minus $V_0$, printed above): at $\lambda = 0$ the score reaches the first
token only through the critic's $V_1$. Against λ = 1's value, λ = 0's is smaller where $V_1$ is below the rewards still to
come, $\sum_{t\ge1} r_t$, and larger where it is above: at $\gamma = 1$ the two differ by exactly $V_1 - \sum_{t\ge1} r_t$.
The preset's λ = 0.95 also weighs every later $V_t$, so which way $\hat A_0$ moves from there is the printout's to
show, on this completion. The last token's $\hat A = r_{T-1} - V_{T-1}$ does
not move: nothing comes after it, whatever $\gamma$ and $\lambda$ are. The printout above shows both.
</details>""",
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
sampling seed; the mean over these prompts is printed above their table); slide *updates* to read the curves part of
the way. Curves are the training batches' means, averaged over the last 5 updates; the
dashed line is the highlighted run's $\text{score} - \beta\sum_t\mathrm{KL}_t$ (at $\beta = 0$ it is the score itself).""",
    r"""md:**Predict first.** Click $\beta = 0$ (no price on the KL). After 30 updates, will its completions still read like
reviews, and will its KL to $\pi_{\text{ref}}$ be about the same as $\beta = 0.2$'s, a few times larger, or ten times larger?""",
    """view = lm_views.kl_tradeoff_view(betas=(0.0, 0.2, 1.0), steps=30)
view""",
    """view.controls["steps"].value = 30   # every run read at its end: means over its last 5 updates
ends = {beta: dict(run) for beta, run in view.data["runs"].items()}
for beta, run in ends.items():
    print(f"β = {beta:<4}: training score {run['score_end']:+.2f}   KL {run['kl_end']:6.2f}   "
          f"score − β·KL {run['reward_end']:+.2f}")
print(f"KL at β = 0 / KL at β = 0.2: {ends[0.0]['kl_end'] / ends[0.2]['kl_end']:.1f}")
view.controls["beta"].value = 0.0     # the β = 0 run: its completions now sit under the plot
[(s["after"], s["after_score"]) for s in view.data["samples"]]""",
    r"""md:<details><summary>Answer</summary>

With $\beta = 0$ nothing holds the walk back: the text drifts from a review towards what VADER likes, repeated, and
its KL to $\pi_{\text{ref}}$ ends above $\beta = 0.2$'s. How many times above is the last ratio printed above:
compare it with the three choices of the question. With $\beta = 1$ the policy stays closest to $\pi_{\text{ref}}$.
In between, the score rises while the KL stays modest — the trade-off PPO-RLHF is tuned for.
The adaptive controller (the default, `--kl-target`) picks $\beta$ for you by steering the KL towards a target instead.
</details>

## Self-check

Answer each question with a number you can read in this notebook's outputs; an answer within 5 % counts.
Fill in the `None`s below and run the cell again (`quiz.reveal()` shows the notebook's own numbers).""",
    """quiz = viz.SelfCheck(
    a0=("With γ = λ = 1, what is Â_0 of the completion in the per-token table?", A0),
    last_reward=("In the per-token table (γ = 1, λ = 0.95), what is r_t of the last token?", table["reward"][-1]),
    kl_ratio=("After 30 updates, how many times larger is the KL at β = 0 than at β = 0.2?",
              ends[0.0]["kl_end"] / ends[0.2]["kl_end"]),
    eval_after=("What is the mean score of the run's fixed prompts after training?", summary["eval_score_after"]),
)
quiz.ask()""",
    "quiz.check(a0=None, last_reward=None, kl_ratio=None, eval_after=None)",
]

NOTEBOOKS["5_grpo_qlora"] = [
    r"""md:# 5 · GRPO with QLoRA

After this notebook (about 60 minutes, on a CPU) you will be able to:

* compute GRPO's group-relative advantages under each reward scale, and say when a group carries no signal;
* say how each `--loss-type` averages the per-token loss, and when two of them are the same number;
* read what $\mu$ passes do to the ratios, the clip fraction and the KL estimates on a real (tiny) language model.

**Notation.** As in notebooks 2–4, the ratio is $r_t(\theta) = \pi_\theta(a_t\mid s_t)/\pi_{\text{old}}(a_t\mid s_t)$, always written
with its $(\theta)$. A completion's reward is one number, written $R_i$ (it is the completion's whole return).

## Dropping the critic

A value head as big as the policy is expensive. GRPO (DeepSeekMath) samples $G$ completions per
prompt and uses the group as the baseline:

$$\hat A_i = \frac{R_i - \operatorname{mean}(R_1,\dots,R_G)}{\operatorname{std}(R_1,\dots,R_G) + \epsilon}$$

every token of completion $i$ shares $\hat A_i$ (`core.group_relative`). `--scale-rewards` picks the
denominator: the group's std (`group`), the batch's (`batch`), or none at all (`none`, Dr. GRPO, which
argues the std over-weights nearly-easy and nearly-impossible prompts, whose small std inflates $\hat A$). A group
whose rewards are all equal has no signal: $\hat A = 0$.

## Rule rewards

No reward model: a completion earns 1 for the right final answer and a bonus for the expected format
(`ladder.tasks.arithmetic`).

The widget below takes 12 rewards (say 1 for right, 0 for wrong), cuts them into groups of $G$ in order, and
computes $\hat A_i$ under each `--scale-rewards`.""",
    SETUP,
    r"""md:**Predict first.** With $G = 4$ the third group is $(1, 1, 1, 1)$. Slide $G$ to 6, so the groups become
$(1,0,0,0,1,1)$ and $(1,0,1,1,1,1)$: how many of the 12 completions will have $\hat A_i = 0$ then?""",
    """view = viz.group_advantages_view("1, 0, 0, 0,  1, 1, 1, 0,  1, 1, 1, 1", group_size=4)
view""",
    """R = torch.tensor([1., 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1])
for G in (4, 6):
    A = core.group_relative(R, G, "group")
    print(f"G = {G}: Â = {' '.join(f'{a:+.2f}' for a in A.tolist())}   ({int((A == 0).sum())} of 12 are 0)")""",
    r"""md:<details><summary>Answer</summary>

None. With $G = 4$ the all-right group gives its four completions $\hat A = 0$: their right answers teach nothing. With
$G = 6$ no group is constant, so every completion gets a non-zero advantage, right ones positive and wrong ones negative;
the printout shows both. How the prompts are grouped decides which comparisons the advantage makes.
</details>""",
    r"""md:## KL in the loss, and how the loss is averaged

GRPO puts the KL into the loss, not the reward, so that its gradient is the gradient of the KL itself, token by
token, rather than a sequence-level reward term that every token of the completion shares. Both are options of the
rung: `--kl-in loss` (GRPO) or `--kl-in reward` (RLOO: $\beta\sum_t \mathrm{KL}_t$ comes off each completion's reward $R_i$);
notebook 6 §2 computes which estimator's gradient is the gradient of which KL. In the loss the KL is estimated
with $k_3$, importance-weighted by $r_t(\theta)$ (notebook 3). Its *value* is 1 until the first optimiser step (to
float32 rounding: $\pi_{\text{old}}$'s log-probs come from a forward pass of their own),
but its *gradient* is not 0: from the very first step it turns $k_3$'s gradient (that of the forward KL) into the
reverse KL's, the one the penalty means (notebook 6 §2). Its value matters once $\pi_\theta$ has moved, whenever
$\mu\cdot M > 1$ ($\mu$ passes of $M$ minibatches): from the second minibatch of the first pass on, or from the second pass
when $M = 1$. The loss is

$$L = \operatorname{agg}\Big(-\min\big(r_t(\theta)\hat A_t,\ \operatorname{clip}(r_t(\theta), 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\,\hat A_t\big) + \beta\, r_t(\theta)\,k_3\Big)$$

`--loss-type` chooses $\operatorname{agg}$ (a mode of `core.aggregate`): `grpo` averages tokens within each
sequence, then sequences (`seq_mean_token_mean`); `bnpo` averages all tokens (`token_mean`); `dr_grpo` and
`dapo` divide the sum by a constant $N$ the rung computes (`sum_over_constant`): $B\cdot L_{\max}$, the
generation budget (`max_new_tokens` per completion), or the real tokens of the whole update; each of the $M$
minibatches divides its sum by its share $N/M$. Long and short completions weigh differently:""",
    """per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [3.0, 0.0, 0.0, 0.0]])
mask = torch.tensor([[1., 1., 1., 1.], [1., 0., 0., 0.]])   # a long and a short completion
modes = {"grpo": ("seq_mean_token_mean", None), "bnpo": ("token_mean", None),   # --loss-type → mode, constant
         "dr_grpo": ("sum_over_constant", 2 * 8), "dapo": ("sum_over_constant", 5)}  # B · L_max (L_max = 8); tokens
losses = {loss_type: round(core.aggregate(per_token, mask, mode, num_tokens).item(), 3)
          for loss_type, (mode, num_tokens) in modes.items()}
losses""",
    r"""md:`dapo` and `bnpo` give the same number here because this is one minibatch ($M = 1$) on one process: DAPO's
constant, the real tokens of the whole update, is then the minibatch's own token count (5), so $\sum/N$ is the token mean. With $M > 1$
each minibatch divides by $N/M$ instead of its own count, and a minibatch of long completions weighs more than under
`bnpo`.""",
    r"""md:## Memory: 4-bit + LoRA + the disabled adapter

`--qlora` loads the base model in 4-bit NF4 (double quantisation), trains only small LoRA adapters, and
gets $\pi_{\text{ref}}$ for free: the reference log-probs are the same model with the adapter **disabled**
— no second copy of the weights. Gradient checkpointing trades compute for activation memory.

## Run it: a few steps of the tiny preset

The tiny preset (a tiny instruct model ladder built and ships with the package,
and synthetic two-digit addition) runs on a CPU, 4-bit included. Two steps here; the reward is the
correctness reward plus the format reward, so a right, well-formatted answer earns 2.
A group whose $G$ rewards are all equal has $\hat A = 0$ and, with $\pi_\theta = \pi_{\text{ref}}$ at the start of training, the
$k_3$ term has zero gradient too: nothing moves. `frac_reward_zero_std` is the fraction of such groups. On
problems that are too hard or too easy for the model it nears 1 and training stalls; the tiny preset's sums suit its
model, as the two steps below show.
On a GPU, the real run is

```bash
python -m ladder.run grpo --qlora --device cuda        # Qwen2.5-0.5B-Instruct on GSM8K
```""",
    """from ladder.rungs import grpo

USE_GPU = False
short = {"steps": 2, "eval_size": 8, "eval_every": 0, "print_samples": 2}
base = {"device": "cuda"} if USE_GPU else {**grpo.PRESETS["tiny"], **short}
summary = grpo.train(grpo.Config(**base, qlora=True, out=str(RUNS / "notebook-5-grpo"), progress=False))
for r in metrics(RUNS / "notebook-5-grpo"):
    print(f"step {r['step']}: " + "  ".join(f"{k} {r[k]:.4f}"
                                            for k in ("reward", "frac_reward_zero_std", "clip_frac", "kl_ref")))""",
    r"""md:Every `--print-samples` updates (here: 2) the rung prints one question → completion → reward line and
appends *all* the update's completions to `OUT/completions.jsonl`, what TRL's `log_completions` shows: each
completion with its reward, each reward function's score, its advantage $\hat A_i$, its length and whether it
was cut off at `--max-new-tokens`. `ladder.runlog.read_completions(OUT)` reads it back (a script can read the
JSON lines as they are). One group of the last logged update — its $G$ advantages are its rewards, centred on
the group's mean and divided by the group's sample standard deviation (plus a small ε):""",
    """from ladder.runlog import read_completions

rows = read_completions(RUNS / "notebook-5-grpo")
group = [r for r in rows if r["step"] == rows[-1]["step"] and r["group"] == 0]
print(f"step {group[0]['step']}, group 0: {group[0]['question']!r}")
print(f"{'completion':<44} {'correct':>7} {'format':>6} {'reward':>6} {'Â_i':>7} {'tokens':>6} cut off")
for r in group:
    print(f"{r['completion'][:42]!r:<44} {r['rewards']['correctness']:>7.0f} {r['rewards']['format']:>6.0f} "
          f"{r['reward']:>6.1f} {r['advantage']:>+7.3f} {r['length']:>6} {'yes' if r['truncated'] else 'no'}")""",
    r"""md:The reward of two steps means nothing; the full tiny run is `python -m ladder.run grpo --qlora --preset tiny`
(and `python -m ladder.run eval --preset tiny --qlora --adapter runs/grpo-tiny-qlora-seed0/adapter` evaluates the adapter).

## What $\mu$ does on the LM

Notebook 3's experiment, on the language model. The three policies of the tiny QLoRA preset:

* $\pi_{\text{ref}}$ — the 4-bit base with the LoRA adapter **disabled**;
* $\pi_{\text{old}}$ — the same model after 8 ordinary GRPO updates (`grpo.grpo_step`); it samples one fixed batch
  of 8 prompts × 8 completions (its number of completion tokens is in the widget's first panel title);
* $\pi_\theta$ — a copy of $\pi_{\text{old}}$'s adapter, given $\mu$ passes of `core.update` with the GRPO loss
  (clipped surrogate $+\ \beta\, r_t(\theta)\, k_3$, $\beta = 0.04$).

The tiny model's vocabulary has a few hundred tokens, so every KL is also computed **exactly** at each visited
position $s_t$: $\sum_v \pi_\theta(v\mid s_t)\log\frac{\pi_\theta(v\mid s_t)}{\pi_x(v\mid s_t)}$. The GRPO loss instead sees one
sampled token $c_t \sim \pi_{\text{old}}$ per position. Over fresh samples at the same positions, the corrected estimate
averages to the exact KL:

$$\mathbb{E}_{c\sim\pi_{\text{old}}}\Big[\frac{\pi_\theta(c)}{\pi_{\text{old}}(c)}k_3(c)\Big] = \sum_v \pi_\theta(v)\,k_3(v) = \mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}}),
\qquad \mathbb{E}_{c\sim\pi_{\text{old}}}[k_3(c)] = \sum_v \pi_{\text{old}}(v)\,k_3(v) \neq \mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$$

and the shaded bands show mean ± std of each estimate over such fresh samples. Building $\pi_{\text{old}}$ and the batch
takes about 15 seconds, once; each setting of the sliders then costs well under a second per pass (CPU). The preset
has one minibatch ($M = 1$), so $\pi_\theta = \pi_{\text{old}}$ until the first optimiser step, at the end of pass 1: every pass-1
ratio is 1, to float32 rounding.""",
    r"""md:**Predict first.** Slide $\mu$ from 1 to 8. Will the plain $k_3$ average (biased) and the importance-weighted one
(corrected) move away from the exact KL$(\pi_\theta\,\|\,\pi_{\text{ref}})$ together, or will one of them stay with it?""",
    """view = viz.lm_mu_view(mu=4, lr=3e-4, clip_eps=0.2)
view""",
    """runs = {mu: viz.lm_mu_passes(mu, lr=3e-4) for mu in (1, 2, 4, 8)}
for mu, run in runs.items():
    print(f"μ={mu}: ratio std {run['ratios'][-1].std():.3f}  clip {run['clip_frac_after'][-1]:.3f}  "
          f"KL(θ‖old) {run['kl_old_exact'][-1]:.4f}  KL(θ‖ref) exact {run['kl_ref_exact'][-1]:.4f}  "
          f"biased {run['kl_ref_biased'][-1]:.4f}  corrected {run['kl_ref_corrected'][-1]:.4f}")
    print(f"      over fresh samples c ~ π_old: biased {run['kl_ref_biased_expected'][-1]:.4f} "
          f"± {run['kl_ref_biased_std'][-1]:.4f}, corrected {run['kl_ref_corrected_expected'][-1]:.4f} "
          f"± {run['kl_ref_corrected_std'][-1]:.4f}")
print(f"fraction of the groups whose G rewards are all equal: {runs[8]['frac_reward_zero_std']:.3f}")""",
    r"""md:**Answer.** As on CartPole, each pass spreads the ratios, the clip switches off more tokens, and KL$(\pi_\theta\,\|\,\pi_{\text{old}})$
grows. Most tokens of a worked sum are nearly certain, so most ratios stay at 1 and the action is in a few
hundred tokens (the histogram is on a log scale) — and in the fraction of groups printed last all $G$ answers scored
the same, so their $\hat A = 0$ and only the KL term moves them. The plain $k_3$ average drifts away from the exact KL as
$\mu$ grows; the corrected one's expectation over fresh samples *is* the exact KL (the second line of each μ
printed above), but one batch's value is noisy — its std there is a good part of the KL itself: a few positions, and
tokens $\pi_{\text{old}}$ seldom samples, carry much of the KL, so this batch's corrected value can sit well off the exact one
(compare them in the first line of each μ). Try the preset's learning rate `1e-3`: Adam's first steps are large, the
plain estimate overshoots further, and the corrected band widens.

**Exercises:** `ex10_group_relative.py` and `ex11_aggregate.py`; then
`python -m ladder.run grpo --preset tiny --use-exercises` trains with your `group_relative` and `aggregate`.""",
    *SAMPLER_CELLS,
    SELF_CHECK,
    """quiz = viz.SelfCheck(
    dr_grpo=("In the two-completion example, what loss does --loss-type dr_grpo give?", losses["dr_grpo"]),
    kl_old=("After μ = 8 passes (learning rate 3e-4), what is the exact KL(π_θ‖π_old)?", runs[8]["kl_old_exact"][-1]),
    zero_std=("Under the μ widget: what fraction of the fixed batch's groups have all G rewards equal?",
              runs[8]["frac_reward_zero_std"]),
    sampler=("In the fourth policy's batch, what sampler/logp_diff_mean did the bfloat16 step log?",
             four.record["sampler/logp_diff_mean"]),
)
quiz.ask()""",
    "quiz.check(dr_grpo=None, kl_old=None, zero_std=None, sampler=None)",
]
