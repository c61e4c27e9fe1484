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

$$\nabla_\theta J(\theta) = \mathbb{E}_{\tau \sim \pi_\theta}\Big[\sum_t \nabla_\theta \log \pi_\theta(a_t \mid s_t)\,\hat A_t\Big]$$

where $\hat A_t$ (the *advantage*) says how much better $a_t$ was than expected. REINFORCE, PPO and
GRPO all follow this gradient; they differ in

* the objective: REINFORCE's $-\hat A_t\log\pi_\theta$, or PPO's and GRPO's clipped surrogate (notebook 2);
* how many passes $\mu$ reuse one batch: REINFORCE one, PPO and GRPO several (below);
* how they estimate $\hat A_t$: returns with a baseline, GAE on a learnt critic (PPO), or the other completions
  of the same prompt (GRPO, no critic);
* the KL to a reference policy: none in REINFORCE or in PPO on CartPole, in the per-token reward in RLHF-PPO
  (notebook 4), in the loss in GRPO (notebook 5).

## Three policies

| name | in the code | what it is |
|---|---|---|
| $\pi_\theta$ | `logp` | the policy being optimised (with gradient) |
| $\pi_{\text{old}}$ | `old_logp` | the policy that **sampled** the batch; equals $\pi_\theta$ until the first optimiser step |
| $\pi_{\text{ref}}$ | `ref_logp` | the frozen anchor of the KL penalty (for LLMs: the model before RL) |

$\mu$ (`mu`) is how many optimisation passes reuse one batch; each pass is cut into $M$ minibatches
(`num_minibatches`), one optimiser step each. After the first optimiser step $\pi_\theta \neq \pi_{\text{old}}$ — from
the second minibatch of the first pass on, or from the second pass when $M = 1$ — and the ratio
$r = \pi_\theta / \pi_{\text{old}}$ starts to matter.""",
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

| rung | notebook | command |
|---|---|---|
| REINFORCE on CartPole | 1 | `python -m ladder.run reinforce` |
| PPO on CartPole | 2, 3 | `python -m ladder.run cartpole` |
| RLHF-PPO, GPT-2 sentiment | 4 | `python -m ladder.run ppo-sentiment` (`--preset tiny` on a CPU) |
| GRPO with QLoRA on GSM8K | 5 | `python -m ladder.run grpo --qlora` (`--preset tiny` on a CPU) |
| GRPO's design space, TRL side by side | 6 | `python -m ladder.run grpo --preset tiny --algo NAME` (grpo, dr_grpo, dapo, gspo, cispo, rloo) |

Every run writes `metrics.jsonl`, `summary.json` and `curves.png`; `--help` lists every knob.""",
    r"""md:**Aside — every knob** (skip it on a first reading): the rungs, and the options of `python -m ladder.run cartpole --help`.""",
    """import subprocess, sys
from ladder.run import RUNGS
print(RUNGS)
help_text = subprocess.run([sys.executable, "-m", "ladder.run", "cartpole", "--help"], capture_output=True, text=True)
lines = help_text.stdout.split("\\n\\n", 1)[1].splitlines()   # past the usage block: the description, the options
print("\\n".join(lines[:next(i for i in range(30, len(lines)) if lines[i].startswith("  -"))]))   # whole options""",
    SELF_CHECK,
    """p_tokens = viz.Predict("Add a third trajectory to the example batch that takes 1 real action (mask [1, 0, 0]). "
                        "How many real actions will `num_tokens` count?")
p_tokens.answer = None
p_last = viz.Predict("At which position t (from 0) will `core.last_step_mask` mark that third row's last real action?")
p_last.answer = None
why_ratio = viz.Reason("An update cuts its batch into M = 4 minibatches. No optimiser step has used the second "
                       "minibatch's samples yet. What are their ratios r = π_θ/π_old when its turn comes, and why?",
                       "all 1: no step has used these samples yet",
                       "not all 1: the first minibatch's step changed π_θ's weights, so its probabilities at every "
                       "state, these samples' too, while π_old is still the policy that sampled them",
                       "not all 1: the second minibatch's samples were drawn by another policy",
                       "all 1: the clip holds every ratio at 1 until the second pass")
why_ratio.answer = None
for question in (p_tokens, p_last, why_ratio):
    question.ask()
    print()""",
    """batch3 = core.Batch(actions=torch.zeros(3, 3, dtype=torch.long), mask=torch.tensor([[1., 1, 1], [1, 1, 0], [1, 0, 0]]))
p_tokens.check(batch3.num_tokens, why="num_tokens counts the mask's 1s (3 + 2 + 1); padding never counts")
p_last.check(int(core.last_step_mask(batch3.mask)[2].argmax()), why="a row's last real action is its mask's last 1")
bridge = viz.cartpole_lab.surrogate_vs_reinforce(steps=1)     # a CartPole batch; π_θ starts as a copy of π_old
far = [float(abs(r - 1).max()) for r in bridge["ratios"]]
why_ratio.check("b", why=f"on a CartPole batch, largest |r − 1| {far[0]:.1e} before the first optimiser step and "
                         f"{far[1]:.1e} after it: π_θ has moved, π_old has not")
viz.tally(p_tokens, p_last, why_ratio)""",
]

NOTEBOOKS["1_reinforce_cartpole"] = [
    r"""md:# 1 · REINFORCE on CartPole

After this notebook (about 30 minutes) you will be able to:

* compute returns-to-go $G_t$ with `core.discounted_returns` on a padded batch;
* check that the gradient of REINFORCE's loss $-\hat A\log\pi_\theta$ is the policy gradient;
* train REINFORCE on CartPole and read its curves: greedy evaluation against sampled training returns.

## The log-derivative trick

$\nabla_\theta \pi_\theta = \pi_\theta \nabla_\theta \log \pi_\theta$, so

$$\nabla_\theta J = \mathbb{E}_{\tau\sim\pi_\theta}\Big[\sum_t \nabla_\theta \log\pi_\theta(a_t\mid s_t)\, G_t\Big],
\qquad L(\theta) = -\frac{1}{N}\sum_{t} \hat A_t \log \pi_\theta(a_t \mid s_t)$$

with $N$ the number of real actions in the batch (`core.aggregate`'s token mean). `core.pg_loss` is exactly that
$L$ per action, before the average; its gradient is the policy gradient.

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
    """# The loss's gradient is the policy gradient: −Â ∇log π. One logit vector, two actions.
logits = torch.zeros(2, requires_grad=True)
logp = torch.log_softmax(logits, -1)[1]            # we took action 1
core.pg_loss(logp, torch.tensor(2.0)).backward()   # Â = 2: push action 1 up
logits.grad                                        # = −Â (onehot(1) − π) = [1, −1]""",
    r"""md:## Train

A short run of the real rung (`python -m ladder.run reinforce --total-steps 8000` does the same from a shell).
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

Try `baseline="none"` and compare the curves: without a baseline each update's gradient is noisier. Whitening subtracts the batch mean (a baseline:
the expected gradient stays the same) and divides by the batch's std. Under plain SGD that division would act like a
learning rate; under Adam, which every rung uses, a constant factor on the loss hardly changes the step. What it does
change: every batch gets the same scale, whether its episodes were short or long (so late batches of long episodes do
not outweigh early ones), the policy term's weight against any other term of the same loss (an entropy bonus, a
value loss), and whether the gradient-norm clip cuts the step.
Exercise 4 has the details.
**Exercises:** `exercises/ex01_discounted_returns.py` and `ex02_reinforce_loss.py` (grade them with
`pytest exercises/`). Once they pass, `python -m ladder.run reinforce --use-exercises` trains with your own
`discounted_returns` and `pg_loss`.""",
    SELF_CHECK,
    """p_gamma = viz.Predict("In the γ = 0.9 example, will G_0 of the first episode grow or shrink at γ = 0.99?",
                       choices=("grow", "shrink"))
p_gamma.answer = None
p_flip = viz.Predict("In the one-logit-vector example, take Â = −2 instead of 2: what will the gradient of the loss on "
                     "logit 0 be?")
p_flip.answer = None
why_once = viz.Reason("Run REINFORCE's loss for μ = 2 passes over each batch. What is wrong with the second pass's "
                      "gradient?", "the batch would have to be padded again",
                      "−Â·∇log π_θ averages over samples as if the current π_θ had drawn them, but the first pass's "
                      "step moved π_θ: they now come from an older policy, and nothing reweights them",
                      "Adam cannot take two steps on one batch", "the returns-to-go G_t change after a step")
why_once.answer = None
for question in (p_gamma, p_flip, why_once):
    question.ask()
    print()""",
    """G_099 = core.discounted_returns(rewards, mask, gamma=0.99)
p_gamma.check("grow" if G_099[0, 0] > G[0, 0] else "shrink",
              why=f"G_0 = {G[0, 0]:.4f} at γ = 0.9, {G_099[0, 0]:.4f} at γ = 0.99: later rewards are discounted less")
flipped = torch.zeros(2, requires_grad=True)
core.pg_loss(torch.log_softmax(flipped, -1)[1], torch.tensor(-2.0)).backward()
p_flip.check(flipped.grad[0], why="the gradient is −Â (onehot(1) − π): flipping Â's sign flips it")
why_once.check("b", why="the policy gradient is an expectation under the current π_θ; notebook 2's ratio "
                        "π_θ/π_old reweights the samples, which is what lets PPO reuse a batch")
viz.tally(p_gamma, p_flip, why_once)""",
]

NOTEBOOKS["2_ppo_cartpole"] = PPO_CELLS
