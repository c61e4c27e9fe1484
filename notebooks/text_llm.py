# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebooks 4–5: PPO for RLHF on sentiment (here), GRPO with QLoRA (``text_grpo.py``).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_grpo import CELLS as GRPO_CELLS
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

**Notation.** The ratio is $\rho_t(\theta) = \pi_\theta(a_t\mid s_t)/\pi_{\text{old}}(a_t\mid s_t)$ — notebook 2's ratio;
$r_t$ is only ever token $t$'s reward.

## Adaptive $\beta$ (Ziegler et al. 2019)

The paper steers $\beta$ with a proportional controller. Number the updates $k = 0, 1, 2, \dots$ (the index $t$ stays
the token's) and let $\mathrm{KL}_k$ be update $k$'s batch mean of the per-completion KL $\sum_t \mathrm{KL}_t$:

$$e_k = \operatorname{clip}\Big(\frac{\mathrm{KL}_k - \mathrm{KL}_{\text{target}}}{\mathrm{KL}_{\text{target}}}, -0.2, 0.2\Big), \qquad \beta_{k+1} = \beta_k\,(1 + K_\beta\, e_k), \qquad K_\beta = 0.1 .$$

ladder's code (`core.AdaptiveKLController`, after the paper's released code) writes the same error as
$\mathrm{KL}_k/\mathrm{KL}_{\text{target}} - 1$ and replaces the constant gain by $n/H$:

$$e_k = \operatorname{clip}\Big(\frac{\mathrm{KL}_k}{\mathrm{KL}_{\text{target}}} - 1, -0.2, 0.2\Big), \qquad \beta_{k+1} = \beta_k\,(1 + e_k\, n/H)$$

after every update — the paper's rule with $K_\beta = n/H$ (the defaults, $n = 128$ and $H = 10\,000$, give
$K_\beta = 0.0128$ per update), where $\mathrm{KL}_{\text{target}}$ is `--kl-target`, $n$ the number of completions in
the batch (`--batch-size`: the controller is updated with the batch size) and $H$ the horizon `--kl-horizon`, counted
in completions.

## The per-token rewards on two completions

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
distribution over the token at position $i+1$, and the policy that sampled is the softmax of $z/\tau$ (the sampling loop
divides by the temperature $\tau$ before it samples; with top-p < 1 it then cuts to the nucleus: notebook 6b). With the prompt's last position at $P-1$:

$$\log\pi(a_t) = \log\operatorname{softmax}\big(z_{P-1+t}/\tau\big)[a_t] = z_{P-1+t,\,a_t}/\tau - \log\sum_v e^{z_{P-1+t,\,v}/\tau},$$

and 0 on padding — `core.token_logp`. On a small batch of the tiny model: the logits' shape, and the first
completion's tokens with their log-probs.

<details><summary>Aside — how the policy computes them</summary>

The policy calls `core.token_logp` on chunks of positions (and shares each prompt's forward pass), so the full
$[B, P+T, V]$ logits never sit in memory; the cell also prints the largest difference from `core.token_logp` on the
whole logits at once.
</details>""",
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

backwards from $t = T-1$ (nothing comes after the last token: $V_T = 0$, $\hat A_T = 0$). Unrolled, $\hat A_t = \sum_{k \ge 0}(\gamma\lambda)^k\,\delta_{t+k}$.
With $\lambda = 1$ the values telescope, $\sum_{k}\gamma^k(\gamma V_{t+k+1} - V_{t+k}) = \gamma^{T-t}V_T - V_t = -V_t$, and

$$\hat A_t = \sum_{t' \ge t}\gamma^{t'-t} r_{t'} - V_t = \gamma^{T-1-t}\,\text{score} - \beta\sum_{t' \ge t}\gamma^{t'-t}\,\mathrm{KL}_{t'} - V_t ,
\qquad \text{so with } \gamma = \lambda = 1:\quad \hat A_0 = \sum_t r_t - V_0 .$$

Each token's advantage is the score and the KL penalties **from itself on**, minus its value baseline. The penalties of
later tokens reach earlier ones, not the other way round: choosing $a_t$ changes the prefix every later token is
sampled from, so their KL and the score are consequences of $a_t$; the tokens before $a_t$ were written before it was
chosen, and their penalties are paid whatever $a_t$ is — in $\hat A_t$ they would only add noise. The preset
has $\lambda = 0.95$, $\gamma = 1$. Last, the rung **whitens**
$\hat A$ over the real tokens of the whole batch (`core.whiten`): the sign of a token's advantage is relative to the
batch; $R_t$ (before whitening) is the value target.

Real numbers: the rung's own policy after 10 updates at a fixed $\beta = 0.2$ (so that $\pi_{\text{old}} \neq \pi_{\text{ref}}$ and the
value head has learnt something) samples 16 completions; one of them, token by token:

<details><summary>Aside — the functions behind the table</summary>

`lm_tokens.token_table` computes it with `core.kl_penalized_rewards`, `core.gae`, `core.last_step_mask` and
`core.whiten`, as the rung's `ppo_sentiment.ppo_targets` does.
</details>""",
    """batch = lm_tokens.ppo_batch(updates=10, kl_coef=0.2, batch_size=16)   # the slowest cell: computed once, then cached
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
    r"""md:**Predict first.** In the widget below, slide λ from 0.95 down to 0. Which of the two moves: $\hat A_0$,
the first token's advantage, or $\hat A$ of the last token? And at $\lambda = 0$, which terms are left in $\hat A_0$?""",
    """gae_view = lm_views.gae_tokens_view(row=row)
gae_view""",
    """for lam in (1.0, 0.95, 0.0):
    t = lm_tokens.token_table(batch, row, gamma=1.0, lam=lam)
    print(f"λ = {lam:<4}:  Â_0 = {t['advantage'][0]:+.4f}   Â_last = {t['advantage'][-1]:+.4f}")""",
    r"""md:<details><summary>Answer</summary>

$\lambda < 1$ trusts the critic more: far rewards are replaced by $V$'s estimate of them; at $\lambda = 0$,
$\hat A_t = \delta_t$. $\hat A_0$ moves from the preset's λ = 0.95 value to the one-step $\delta_0 = r_0 + \gamma V_1 - V_0$
at $\lambda = 0$ (at λ = 1 it is the whole sum of rewards minus $V_0$, printed above): at $\lambda = 0$ the score reaches the first
token only through the critic's $V_1$. Against λ = 1's value, λ = 0's is smaller where $V_1$ is below the rewards still to
come, $\sum_{t\ge1} r_t$, and larger where it is above: at $\gamma = 1$ the two differ by exactly $V_1 - \sum_{t\ge1} r_t$.
The preset's λ = 0.95 also weighs every later $V_t$; which way $\hat A_0$ moves from there depends on the critic's
values on this completion (the printout shows it). The last token's $\hat A = r_{T-1} - V_{T-1}$ does
not move: nothing comes after it, whatever $\gamma$ and $\lambda$ are. The printout above shows both.
</details>""",
    r"""md:## Reward vs KL: what $\beta$ buys

Every RLHF run walks a path in the (KL, score) plane: the reward model's score goes up as the policy moves
away from $\pi_{\text{ref}}$. $\beta$ is the price of that distance. PPO maximises, per completion,

$$\text{score} - \beta \sum_t \mathrm{KL}_t .$$

The widget below trains the tiny preset once for each $\beta$, **fixed** (`adaptive_kl=False`, so each run pays the
same price all along), 30 updates of 32 completions each — each run once (the slowest cell of the notebook); the runs are
cached. Pick a $\beta$ to highlight it and to see its completions before and after training (same prompts, same
sampling seed; the mean over these prompts is printed above their table); slide *updates* to read the curves part of
the way. Curves are the training batches' means, averaged over the last 5 updates; the
dashed line is the highlighted run's $\text{score} - \beta\sum_t\mathrm{KL}_t$ (at $\beta = 0$ it is the score itself).""",
    r"""md:**Predict first.** Click $\beta = 0$ (no price on the KL). After 30 updates, will its completions still read like
reviews, and will its KL to $\pi_{\text{ref}}$ end larger or smaller than $\beta = 0.2$'s?""",
    """view = lm_views.kl_tradeoff_view(betas=(0.0, 0.2, 1.0), steps=30)
view""",
    """view.controls["steps"].value = 30   # every run read at its end: means over its last 5 updates
ends = {beta: dict(run) for beta, run in view.data["runs"].items()}
for beta, run in ends.items():
    print(f"β = {beta:<4}: training score {run['score_end']:+.2f}   KL {run['kl_end']:6.2f}   "
          f"score − β·KL {run['reward_end']:+.2f}")
larger = "larger" if ends[0.0]["kl_end"] > ends[0.2]["kl_end"] else "not larger"
print(f"KL at β = 0 / KL at β = 0.2: {ends[0.0]['kl_end'] / ends[0.2]['kl_end']:.1f} (β = 0's KL ended {larger})")
print("the runs by their KL, smallest first: " + ", ".join(f"β = {b}" for b in sorted(ends, key=lambda b: ends[b]["kl_end"])))
view.controls["beta"].value = 0.0     # with a live kernel the widget above redraws with the β = 0
# run's completions under its plot (a static copy keeps its first drawing); the list below prints the same completions
[(s["after"], s["after_score"]) for s in view.data["samples"]]""",
    r"""md:<details><summary>Answer</summary>

A large $\beta$ stops the walk early (close to $\pi_{\text{ref}}$, a modest score); $\beta = 0$ lets it run as far as
the reward model pays — which is where **reward hacking** lives: the reward model is only a proxy, and nothing keeps
the text fluent once it has found what the proxy likes. Read the $\beta = 0$ run's completions (the list above) for
text drifting from a review towards what VADER likes; the printout says whether its KL ended larger than
$\beta = 0.2$'s, and by what factor. A higher price should keep the policy closer to $\pi_{\text{ref}}$; the line that
orders the runs by their KL shows whether it did, in these 30 updates. In between, the score can rise while the KL
stays modest — the trade-off PPO-RLHF is tuned for.
The adaptive controller (the default, `--kl-target`) picks $\beta$ for you by steering the KL towards a target instead.
</details>""",
    SELF_CHECK,
    """p_beta = viz.Predict("In the two-completion example (β = 0.2), double β to 0.4: what will the first completion's "
                      "last reward r_2 be?", decimals=2)
p_beta.answer = None
p_reach = viz.Predict("With γ = 1, the preset's λ = 0.95 and no critic (V = 0), take 1 off the LAST token's reward in "
                      "the first completion (3 tokens). By how much will the first token's advantage Â_0 change?",
                      decimals=2)
p_reach.answer = None
why_beta = viz.Reason("The adaptive controller (KL_target = 6, n = 128, H = 10 000) meets two runs: one whose batch KL "
                      "sits at 6.3, 5 % above its target, and one at 60, ten times its target. How do the two runs' "
                      "per-update changes of β compare, and why?",
                      "the run at 60 moves β 180 times as much: the error (KL_k − KL_target)/KL_target is 9 against "
                      "0.05, and each update applies the fraction n/H of it",
                      "both move β by the same factor 1 + n/H: the controller reads only the sign of KL_k − KL_target, "
                      "so any KL above the target raises β alike",
                      "the run at 60 moves β 4 times as much: its error of 9 is clipped to 0.2 against the other's "
                      "0.05, so no single update changes β by more than a factor 1 ± 0.2·n/H",
                      "the run at 60 moves β about 19 times as much: the error is measured against the batch's own KL, "
                      "(KL_k − KL_target)/KL_k = 0.9 against 0.048, then scaled by n/H")
why_beta.answer = None
for question in (p_beta, p_reach, why_beta):
    question.ask()
    print()""",
    """doubled, _ = core.kl_penalized_rewards(scores, old_logp, ref_logp, mask, kl_coef=0.4)
p_beta.check(doubled[0, 2], why=f"r_2 = score − β·KL_2 = {scores[0]:g} − 0.4·({kl[0, 2]:+.2f})")
dones, no_critic = core.last_step_mask(mask), torch.zeros_like(rewards)
penalised = rewards.clone()
penalised[0, 2] -= 1.0
moved = core.gae(penalised, no_critic, dones, 1.0, 0.95)[0] - core.gae(rewards, no_critic, dones, 1.0, 0.95)[0]
p_reach.check(moved[0, 0], why="with V = 0, δ_t = r_t and Â_0 = Σ_k (γλ)^k r_k: the last reward reaches token 0 "
              f"weighted (γλ)² = {0.95 ** 2:.4f}; every token's Â: {moved[0].tolist()}")
step = {kl: core.AdaptiveKLController(0.2, 6.0, 10_000).update(kl, 128) / 0.2 - 1 for kl in (6.3, 60.0)}
times = step[60.0] / step[6.3]
why_beta.check({180: "a", 1: "b", 4: "c", 19: "d"}[round(times)],
               why=f"β × (1 {step[6.3]:+.6f}) at 6.3 and × (1 {step[60.0]:+.6f}) at 60: {times:.1f} times the change, "
                   "as the error is clipped to ±0.2 before the gain n/H applies")
viz.tally(p_beta, p_reach, why_beta)""",
]

NOTEBOOKS["5_grpo_qlora"] = GRPO_CELLS
