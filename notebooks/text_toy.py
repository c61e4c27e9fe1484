# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebooks 0–2: the ladder, REINFORCE, PPO on CartPole (notebook 2's in ``text_ppo.py``;
``SETUP`` and ``SELF_CHECK``, which every notebook uses, in ``text_common.py``).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_common import SELF_CHECK, SETUP
from text_ppo import CELLS as PPO_CELLS

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["0_the_ladder"] = [
    r"""md:# 0 · The ladder

After this notebook (about 15 minutes) you will be able to:

* write the policy gradient and say what the advantage $\hat A_t$ does in it;
* tell apart the three policies $\pi_\theta$, $\pi_{\text{old}}$, $\pi_{\text{ref}}$ and the passes $\mu$ and minibatches $M$;
* build a padded `[B, T]` `Batch` with its mask and run any rung from the shell.

This course climbs from a pole balanced on a cart to a language model that learns arithmetic, and
**every rung runs the same code**: `ladder.core`. What changes from rung to rung is only which
tensors go in.

## What a policy gradient is

A policy $\pi_\theta(a \mid s)$ picks actions; a trajectory $\tau = (s_0, a_0, r_0, s_1, \dots)$
earns a return $R(\tau)$. We want to climb $J(\theta) = \mathbb{E}_{\tau \sim \pi_\theta}[R(\tau)]$.
The log-derivative trick turns the gradient of an expectation into an expectation we can sample:

$$\nabla_\theta J(\theta) = \mathbb{E}_{\tau \sim \pi_\theta}\Big[\sum_t \nabla_\theta \log \pi_\theta(a_t \mid s_t)\,A^{\pi_\theta}(s_t, a_t)\Big]
\approx \frac1B\sum_{i=1}^{B}\sum_t \nabla_\theta \log \pi_\theta(a_{i,t} \mid s_{i,t})\,\hat A_{i,t}$$

where $A^{\pi_\theta}(s_t, a_t)$ (the *advantage*) says how much better $a_t$ was than the policy's average from
$s_t$, and the sample average over $B$ sampled trajectories uses an estimate $\hat A_t$ of it. (The equality also
holds with $G_t - b(s_t)$, the return from $t$ on minus any baseline of the state, in place of $A^{\pi_\theta}$:
notebook 1.) REINFORCE, PPO and GRPO all follow this gradient; they differ in

* the loss: REINFORCE's $-\hat A_t\log\pi_\theta$, or minus PPO's and GRPO's clipped surrogate (notebook 2);
* how many passes $\mu$ reuse one batch (below): REINFORCE one, PPO several; GRPO can reuse a batch too, but its
  usual setting is $\mu = 1$ (DeepSeekMath's, TRL's `num_iterations` default, and the grpo rung's `--mu`, printed
  below);
* how they estimate $\hat A_t$: returns with a baseline, GAE on a learnt critic (PPO), or the other completions
  of the same prompt (GRPO, no critic);
* the KL to a reference policy: none in REINFORCE or in PPO on CartPole, in the per-token reward in RLHF-PPO
  (notebook 4), in the loss in GRPO (notebook 5).

## Three policies

| name | in the code | what it is |
|---|---|---|
| $\pi_\theta$ | `logp` | the policy being optimised (with gradient) |
| $\pi_{\text{old}}$ | `old_logp` | the policy that **sampled** the batch, frozen while the update runs |
| $\pi_{\text{ref}}$ | `ref_logp` | the frozen anchor of the KL penalty (for LLMs: the model before RL) |

$\mu$ (`mu`) is how many optimisation passes reuse one batch; each pass is cut into $M$ minibatches
(`num_minibatches`), one optimiser step each. The importance ratio $\rho_t = \pi_\theta(a_t\mid s_t) / \pi_{\text{old}}(a_t\mid s_t)$
compares the two on each sampled action (notebook 2); when it starts to differ from 1 is a question of the
self-check.""",
    SETUP,
    r"""md:## A batch

Experience arrives as a `Batch` of padded `[B, T]` tensors — a CartPole rollout and an LM completion are the same
shape of thing — with a mask: 1 for a real action, 0 for padding. Every rung fills one and hands it to the same
`core.update`, which runs the $\mu$ passes.""",
    """# A batch: two trajectories of length 3, the second one padded after 2 actions.
batch = core.Batch(actions=torch.tensor([[0, 1, 1], [1, 0, 0]]), mask=torch.tensor([[1., 1, 1], [1, 1, 0]]))
print(len(batch), "rows,", batch.num_tokens, "real actions")
print(core.last_step_mask(batch.mask))""",
    r"""md:**Aside — inside the package** (skip it on a first reading). `ladder.core` is pure torch, no environments and no
tokenizers; its docstring is the map, and these are its public names:""",
    """print(core.__doc__)
print(sorted(core.__all__))""",
    r"""md:## How to run each rung

Each rung is a command of `python -m ladder.run`. The table below lists the rungs `ladder.rungs.registry` finds —
every module of `ladder.rungs` that declares itself with `RUNG = Rung(name=…, …)` — in their order on the ladder:
`registry.rungs()` maps each rung's name to its module; the title is the summary its declaration gives
(`RUNG.summary`, what `python -m ladder.run --help` prints) and its `ALGOS` are its `--algo` bundles (a method's flags
as its paper sets them: grpo and agent have them); the notebook column is written by hand here. Every run writes `metrics.jsonl`, `summary.json` and `curves.png`; `--help` lists every knob.""",
    """from ladder.rungs import registry

NOTEBOOK = {"reinforce": "1", "cartpole": "2, 3", "ppo-sentiment": "4, 9", "grpo": "5, 6", "eval": "5", "agent": "7",
            "reward-model": "9", "dpo": "9"}
rows = []
for name, module in registry.rungs().items():   # in their order on the ladder
    title = module.RUNG.summary
    algos = f" (`--algo`: {', '.join(module.ALGOS)})" if module.ALGOS else ""
    tiny = " (`--preset tiny` on a CPU)" if "tiny" in module.PRESETS and name not in ("reinforce", "cartpole") else ""
    rows.append(f"| {title} | {NOTEBOOK.get(name, '—')} | `python -m ladder.run {name}`{tiny}{algos} |")
display(Markdown("\\n".join(["| rung | notebook | command |", "|---|---|---|", *rows])))
print("μ of the grpo rung by default:", registry.find("grpo").Config().mu)""",
    r"""md:**Aside — every knob** (skip it on a first reading): the options of `python -m ladder.run cartpole --help`.""",
    """import subprocess, sys
help_text = subprocess.run([sys.executable, "-m", "ladder.run", "cartpole", "--help"], capture_output=True, text=True)
lines = help_text.stdout.split("\\n\\n", 1)[1].splitlines()   # past the usage block: the description, the options
print("\\n".join(lines[:next(i for i in range(30, len(lines)) if lines[i].startswith("  -"))]))   # whole options""",
    SELF_CHECK,
    """p_pad = viz.Predict("A batch holds 4 episodes of lengths 7, 3, 5 and 1, padded as `Batch` pads them. How many "
                     "padding entries (mask 0) will its mask hold?")
p_pad.answer = None
p_bucket = viz.Predict("The same 4 episodes in two batches of 2 rows, grouped by length ({7, 5} and {3, 1}), each "
                       "padded to its own longest: how many padding entries will the two masks hold together?")
p_bucket.answer = None
why_ratio = viz.Reason("An update cuts its batch into M = 4 minibatches. No optimiser step has used the second "
                       "minibatch's samples yet. What are their ratios ρ = π_θ/π_old when its turn comes, and why?",
                       "all 1: π_old is re-recorded from the current π_θ at the start of each minibatch, so every "
                       "minibatch's ratios start again from 1",
                       "all 1: the first step moved π_θ only at the first minibatch's states, where it had a "
                       "gradient; the second minibatch's states are others, so their probabilities are unchanged",
                       "not all 1: the first minibatch's step changed π_θ's shared weights, so its probabilities at "
                       "every state, these samples' too, while π_old is still the policy that sampled them",
                       "not all 1, but only where a second-minibatch state also occurs in the first minibatch: "
                       "there π_θ has moved, everywhere else it has not")
why_ratio.answer = None
for question in (p_pad, p_bucket, why_ratio):
    question.ask()
    print()""",
    """lengths = torch.tensor([7, 3, 5, 1])
mask4 = (torch.arange(int(lengths.max())) < lengths[:, None]).float()   # [4, 7]: padded to the longest
batch4 = core.Batch(actions=torch.zeros_like(mask4, dtype=torch.long), mask=mask4)
p_pad.check(mask4.numel() - batch4.num_tokens, why=f"every row is padded to the longest, 7: {mask4.numel()} entries, "
                                                   f"{batch4.num_tokens} of them real")
pairs = [lengths[[0, 2]], lengths[[1, 3]]]                        # {7, 5} and {3, 1}
bucketed = [(torch.arange(int(pair.max())) < pair[:, None]).float() for pair in pairs]
p_bucket.check(sum(int((m == 0).sum()) for m in bucketed),
               why=f"each pair is padded to its own longest: {' + '.join(str(int((m == 0).sum())) for m in bucketed)}, "
                   f"against {mask4.numel() - batch4.num_tokens} in one batch. Grouping rows by length (bucketing) "
                   "saves compute on padding")
bridge = viz.cartpole_lab.surrogate_vs_reinforce(steps=1)     # a CartPole batch; π_θ starts as a copy of π_old
far = [float(abs(rho - 1).max()) for rho in bridge["ratios"]]
why_ratio.check("c", why=f"on a CartPole batch, largest |ρ − 1| {far[0]:.1e} before the first optimiser step and "
                         f"{far[1]:.1e} after it: π_θ has moved, π_old has not. So ρ ≠ 1 from the second minibatch "
                         "of the first pass on (from the second pass when M = 1)")
viz.tally(p_pad, p_bucket, why_ratio)""",
]

NOTEBOOKS["1_reinforce_cartpole"] = [
    r"""md:# 1 · REINFORCE on CartPole

After this notebook (about 30 minutes) you will be able to:

* compute returns-to-go $G_t$ with `core.discounted_returns` on a padded batch;
* check that the gradient of REINFORCE's loss $-\hat A\log\pi_\theta$ is minus its policy-gradient estimate;
* train REINFORCE on CartPole and read its curves: greedy evaluation against sampled training returns.

## The log-derivative trick

$\nabla_\theta \pi_\theta = \pi_\theta \nabla_\theta \log \pi_\theta$. With a discount $\gamma$ the objective is the
expected discounted return $J_\gamma(\theta) = \mathbb{E}_{\tau\sim\pi_\theta}\big[\sum_t \gamma^t r_t\big]$ (notebook 0's
$J$ is $\gamma = 1$), and the trick gives

$$\nabla_\theta J_\gamma = \mathbb{E}_{\tau\sim\pi_\theta}\Big[\sum_t \gamma^t\,\nabla_\theta \log\pi_\theta(a_t\mid s_t)\, G_t\Big],
\qquad G_t = \sum_{k\ge 0}\gamma^k r_{t+k}.$$

REINFORCE as everyone runs it, this rung included, drops the $\gamma^t$: it weights each $\nabla_\theta\log\pi_\theta(a_t\mid s_t)$
by $\hat A_t$ alone (with $\gamma = 1$ the two agree; with $\gamma < 1$ the common form counts late steps as much as
early ones, and $\gamma$ only shortens how far each $G_t$ looks ahead). Its loss is

$$L(\theta) = -\frac{1}{N}\sum_{t} \hat A_t \log \pi_\theta(a_t \mid s_t)$$

with $N$ the number of real actions in the batch (`core.aggregate`'s token mean). `core.pg_loss` is exactly that
$L$ per action, before the average; its gradient is **minus** the $\gamma^t$-free policy-gradient estimate above
(exactly minus the estimate of $\nabla_\theta J$ when $\gamma = 1$), so a descent step on $L$ is an ascent step along it.

## Returns-to-go

An action cannot influence rewards that came before it, so each $\log\pi$ is weighted only by the
reward that follows: $G_t = r_t + \gamma G_{t+1}$ (`core.discounted_returns`).

## A baseline

Subtracting any $b(s_t)$ leaves the gradient unbiased, because
$\mathbb{E}_{a\sim\pi}[\nabla\log\pi(a\mid s)] = \nabla \sum_a \pi(a\mid s) = 0$, and it can cut the
variance a lot: $\hat A_t = G_t - b(s_t)$. The rung offers `--baseline none | whiten | value`.""",
    SETUP,
    """rewards = torch.tensor([[1., 1., 1., 1., 0.], [1., 1., 0., 0., 0.]])
mask = torch.tensor([[1., 1., 1., 1., 0.], [1., 1., 0., 0., 0.]])   # the second episode ended after 2 steps
G = core.discounted_returns(rewards, mask, gamma=0.9)
G""",
    """# The loss's gradient is minus the policy gradient: −Â ∇log π, the descent direction. One logit vector, two actions.
logits = torch.zeros(2, requires_grad=True)
logp = torch.log_softmax(logits, -1)[1]            # we took action 1
core.pg_loss(logp, torch.tensor(2.0)).backward()   # Â = 2: push action 1 up
logits.grad                                        # = −Â (onehot(1) − π) = [1, −1]""",
    r"""md:## Train

A short run of the real rung (`python -m ladder.run reinforce --total-steps 8000 --eval-every 4000 --eval-episodes 20`
runs the same configuration from a shell, into its own directory).
The batch is `episodes_per_update` complete episodes (printed below), padded to `[episodes, T_max]` with a mask; `core.update` runs one pass with
`objective="reinforce"`: one optimiser step per batch, then a fresh batch (the self-check asks what a
second pass over the same batch would get wrong).""",
    """from ladder.rungs import reinforce

cfg = reinforce.Config(total_steps=8_000, eval_every=4_000, eval_episodes=20, out=str(RUNS / "notebook-1-reinforce"),
                       progress=False)
print({k: getattr(cfg, k) for k in ("total_steps", "episodes_per_update", "baseline", "eval_episodes")})
summary = reinforce.train(cfg)
{k: summary[k] for k in ("env_steps", "eval_return_mean", "wall_s")}""",
    """display(Image(filename=str(RUNS / "notebook-1-reinforce" / "curves.png")))
[(r["step"], r["episode_return"]) for r in metrics(RUNS / "notebook-1-reinforce")][-5:]""",
    r"""md:The two returns in the plot measure different episodes. `eval_return_mean` in the summary comes from separate
**greedy** evaluation episodes: the argmax action at every step. The training return is the mean over the
`episodes_per_update` episodes of each batch, played with **sampled** actions: a stochastic policy now and then pushes the wrong way and
drops the pole sooner, so the training curve tends to sit below the greedy one (compare the last training returns
printed above with `eval_return_mean`).

Try `baseline="none"` and compare the curves: without a baseline each update's gradient is noisier. Whitening
subtracts the batch mean and divides by the batch's std. A baseline that does not depend on the action leaves the
expected gradient unchanged; the batch mean is only approximately one (it holds each sample's own $G_t$, so it
correlates a little with that sample's action, a bias that shrinks as the batch grows). Dividing by the std rescales
the whole step, like a change of learning rate: under plain SGD it would act as one; under Adam, which every rung
uses, a constant factor on the loss hardly changes the step. What it does change: every batch gets the same scale,
whether its episodes were short or long (so late batches of long episodes do not outweigh early ones), the policy
term's weight against any other term of the same loss (an entropy bonus, a value loss), and whether the
gradient-norm clip cuts the step.
Exercise 4 has the details.
**Exercises:** `exercises/ex01_discounted_returns.py` and `ex02_reinforce_loss.py` (grade them with
`pytest exercises/`). Once they pass, `python -m ladder.run reinforce --use-exercises` trains with your own
`discounted_returns` and `pg_loss`.""",
    SELF_CHECK,
    """p_late = viz.Predict("In the γ = 0.9 example, give the first episode one reward only: +1 at its last real step "
                      "(t = 3), 0 before it. What will its G_0 be?")
p_late.answer = None
p_flip = viz.Predict("Three actions with logits all 0 (π uniform); we took action 2 and Â = 3. What will the "
                     "gradient of the loss on logit 2 be?")
p_flip.answer = None
why_once = viz.Reason("Run REINFORCE's loss for μ = 2 passes over each batch. What is wrong with the second pass's "
                      "gradient?",
                      "nothing: Â and the sampled actions are fixed numbers, so the second pass's −Â·∇log π_θ is the "
                      "same unbiased estimate of the policy gradient as the first pass's",
                      "the padding: after a step the padded positions get a nonzero log π_θ, so the second pass's "
                      "token mean counts them among the real actions",
                      "Adam's moments: its second step on the same samples divides by a variance estimated from "
                      "those very samples, which biases the step toward them",
                      "−Â·∇log π_θ averages over samples as if the current π_θ had drawn them, but the first pass's "
                      "step moved π_θ: they now come from an older policy, and nothing reweights them")
why_once.answer = None
for question in (p_late, p_flip, why_once):
    question.ask()
    print()""",
    """late = torch.zeros_like(rewards)
late[0, 3] = 1.0
G_late = core.discounted_returns(late, mask, gamma=0.9)
p_late.check(G_late[0, 0], why=f"γ³ = 0.9³: a reward k steps on counts γ^k in G_t; the row's G_t: {G_late[0].numpy().round(4)}")
three = torch.zeros(3, requires_grad=True)
core.pg_loss(torch.log_softmax(three, -1)[2], torch.tensor(3.0)).backward()
p_flip.check(three.grad[2], why=f"−Â (onehot(2) − π) = −3 · (1 − 1/3); the whole gradient is {three.grad.numpy().round(4)}")
why_once.check("d", why="the policy gradient is an expectation under the current π_θ; notebook 2's ratio "
                        "π_θ/π_old reweights the samples, which is what lets PPO reuse a batch")
viz.tally(p_late, p_flip, why_once)""",
]

NOTEBOOKS["2_ppo_cartpole"] = PPO_CELLS
