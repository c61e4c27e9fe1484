# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 10: learning from a teacher — on-policy distillation, the teacher's reward on every
token, forward and reverse KL, and the policy gradient as the reverse-KL gradient.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_common import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["10_learning_from_a_teacher"] = [
    r"""md:# 10 · Learning from a teacher

After this notebook (about an hour, on a CPU; its one run takes seconds) you will be able to:

* name the three policies a student is compared with — $\pi_{\text{old}}$, $\pi_{\text{ref}}$, $\pi_{\text{teacher}}$ —
  and say for each what its KL is for, who is frozen, and where it enters: the ratio, the penalty, the reward;
* compute the teacher's reward on every token and the credit it gives at $\gamma = 1$ and $\gamma = 0$, beside GRPO's one
  number per completion;
* tell the forward KL from the reverse one, and place GKD's generalized JSD between them: mass-covering against
  mode-seeking;
* show, on a language small enough to enumerate, that the policy gradient with the teacher's reward **is** the gradient
  of the reverse KL;
* run rung 7, read what it logs, and hear what the doctor says about it.

Rungs 3–6 learn from one number per completion — a classifier's score, a rule that checks the answer, a reward
model's — or from which of two completions a person preferred. A stronger model that already does the task can say
much more: how likely it finds **each token** the student wrote.
On-policy distillation (Gu et al. 2024's MiniLLM; Agarwal et al. 2024's GKD) lets the student sample, as in GRPO, and
asks the teacher to score every token of every sample. Everything here runs on the two tiny models the package ships:
the student `@tiny-math`, which adds two-digit numbers column by column but forgets to carry, and its tutor's model
`@tiny-math-teacher`, which always carries.""",
    SETUP,
    """from ladder.rungs import distill
from ladder.viz import distill_lab as lab, distill_views as views

preset = distill.PRESETS["tiny"]
print(f"distill --preset tiny: student {preset['model']}, teacher {preset['teacher']}; {preset['prompts_per_step']} sums × "
      f"G = {preset['group_size']} completions per update, lr {preset['lr']:g} (LoRA r = {preset['lora_r']})")""",
    r"""md:## 0 · Three policies, three KLs

A learner of this course has met a KL between $\pi_\theta$ and another policy twice already. This rung adds a third, and
the three have three different jobs:

| policy | what its KL is for | who is frozen | where it enters |
|---|---|---|---|
| $\pi_{\text{old}}$ | **the trust region**: one update must not move $\pi_\theta$ far from the policy that sampled its batch | $\pi_{\text{old}}$, for the update's $\mu$ passes; the next update samples with the new $\pi_\theta$ | the ratio $\rho_t = \pi_\theta/\pi_{\text{old}}$, clipped to $[1-\varepsilon, 1+\varepsilon]$ (notebooks 2–3) |
| $\pi_{\text{ref}}$ | **the anchor**: stay near the model you started from while a reward pulls | $\pi_{\text{ref}}$, for the whole run (LoRA: the adapter off), unless `--ref-sync-every` refreshes it | a penalty $\beta\cdot\mathrm{KL}$: in the per-token reward (notebook 4) or in the loss (notebook 5) |
| $\pi_{\text{teacher}}$ | **the target**: become the teacher | $\pi_{\text{teacher}}$, another and stronger model | the reward itself, $r_t = -(\log\pi_\theta - \log\pi_{\text{teacher}})(y_t)$ |

The third row is the second with its sign of intent turned round. A penalty keeps a KL small against the pull of a
reward; here the KL is all there is, and the teacher sits where $\pi_{\text{ref}}$ sat. The rung's defaults say so:
`--kl-coef 0` (no $\pi_{\text{ref}}$ in the loss: the teacher is the anchor) and `--reward-weights 0` (the correctness of
the answer only logged).

The cell below runs the tiny `distill` preset for a few updates — the rung's own `distill.build`, through the training
loop held in memory (`loop.in_memory`, as notebooks 5 and 7 do), its rollout only watched — and measures after each
update $k$, on its batch, each KL summed over a completion's tokens and averaged over the batch (nats per completion):

* $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{old}})$ **after** update $k$: how far its step moved $\pi_\theta$ from the
  policy that sampled the batch. The tokens are $\pi_{\text{old}}$'s, so each $k_3$ is weighted by $\rho_t$, as notebook 3
  taught (`core.kl_estimate(logp, old_logp, "k3", old_logp=old_logp)`).
* $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$ of $\pi_\theta$ as it **sampled** batch $k$, on its own tokens, with
  $k_1$ and $k_3$; $\pi_{\text{ref}}$ is the student before its first update (the LoRA adapter disabled).
* $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{teacher}})$, the same way: the rung's own `distill/reverse_kl`, minus the sum
  of each completion's rewards — the $k_1$ estimate.""",
    """p_zero = viz.Predict("At update 1, one of the three KLs is 0 (to float rounding). Which?",
                     choices=("KL(π_θ‖π_old)", "KL(π_θ‖π_ref)", "KL(π_θ‖π_teacher)"))
p_zero.answer = None      # your prediction, before you run on""",
    """UPDATES = 10
kls = lab.three_kls(updates=UPDATES)
display(Image(data=views.three_kls_figure(kls)))
first = {"KL(π_θ‖π_old)": kls.trust[0], "KL(π_θ‖π_ref)": kls.anchor_k3[0], "KL(π_θ‖π_teacher)": kls.target[0]}
p_zero.check(min(first, key=lambda name: abs(first[name])),
             why=f"π_θ sampling batch 1 is the student before any update, π_ref itself: k1 {kls.anchor_k1[0]:+.1e}, "
                 f"k3 {kls.anchor_k3[0]:.1e}; the first step had already moved π_θ by {kls.trust[0]:.4f} from π_old")
print(f"KL(π_θ‖π_old) after each update: {min(kls.trust):.3f} … {max(kls.trust):.3f} nats per completion "
      f"(the clip fraction of every update: {max(r['clip_frac'] for r in kls.records):g})")
print(f"KL(π_θ‖π_ref) at update {UPDATES}: k1 {kls.anchor_k1[-1]:+.3f}, k3 {kls.anchor_k3[-1]:.3f}; "
      f"the largest over the run: k3 {max(kls.anchor_k3):.3f}; negative k1 estimates: "
      f"{sum(x < 0 for x in kls.anchor_k1)} of {UPDATES}")
start, end = lab.first_and_last(kls.target, 3)
print(f"KL(π_θ‖π_teacher): {min(kls.target):.2f} … {max(kls.target):.2f} nats per completion; "
      f"mean of the first 3 updates {start:.2f}, of the last 3 {end:.2f}: "
      + (f"{1 - end / start:.0%} lower" if end < start else "not lower: this run's batches did not show the descent"))
print(f"the largest step KL(π_θ‖π_old), {max(kls.trust):.3f}, against the smallest KL(π_θ‖π_teacher) of any batch, "
      f"{min(kls.target):.2f}; the batches' correctness (logged at weight 0): "
      + " ".join(f"{r['rewards/correctness/mean']:.2f}" for r in kls.records))""",
    r"""md:Read the three panels as three questions about one student.

* **$\pi_{\text{old}}$: how far did this update go?** A small number, and never 0 after a step. With $\mu = 1$ pass and
  one minibatch the ratio is exactly 1 during the update's only step, so the clip never acts (its fraction is printed);
  the trust region matters when a batch is reused ($\mu > 1$, or several minibatches: notebooks 3 and 6). Distillation
  inherits the whole clipped update from grpo, unchanged.
* **$\pi_{\text{ref}}$: how far from where it started?** 0 at update 1, then the whole drift, which nothing here holds
  back (`--kl-coef 0`). $k_1$ is unbiased but can go negative on one batch; $k_3$ cannot (notebook 3).
* **$\pi_{\text{teacher}}$: how far from where it should be?** The only one that starts large, and the only one the
  updates descend (the means of the first and the last three updates are printed above). Each point is one batch of new
  sums, a one-sample estimate per completion, so it moves from update to update with the batch — and with the
  student: a batch the student gets more of right (the dotted line) is cheaper, since a forgotten carry costs the most
  (section 1). The tiny preset's whole run (section 5's first command) is 30 updates, and its `summary.json` keeps the reverse KL of the first and the last five.

## 1 · The teacher's reward on every token

The student samples a completion $y$; both models read it, token by token, and each token's reward is how much more the
teacher likes it than the student does:

$$r_t = -\big(\log\pi_\theta(y_t \mid x, y_{<t}) - \log\pi_{\text{teacher}}(y_t \mid x, y_{<t})\big),
\qquad \hat A_t = \sum_{t' \ge t} \gamma^{\,t'-t}\, r_{t'} \quad (\texttt{--discount}\ \gamma).$$

No baseline is subtracted: $\hat A_t$ is the return $G_t$ of notebook 1 (positions counted from 0 here, $\hat A_0$ the
first token's). $-\sum_t r_t$ is the $k_1$ estimate of the completion's reverse KL, $\log\pi_\theta(y)/\pi_{\text{teacher}}(y)$, so
$\gamma = 1$ gives every token the rest of the completion's reverse KL (negated) and $\gamma = 0$ its own term only.
GRPO, with the correctness reward, gives each completion one number for all its tokens:
$\hat A_i = (r_i - \text{mean}_{\text{group}})/\text{std}_{\text{group}}$. This is exercise 28
(`ex28_distillation_rewards`): the reward, with $\pi_{\text{teacher}}$ where $\pi_{\text{ref}}$ was in exercise 7.

Below, one group of the student **before training** ($\pi_{\text{ref}}$) on 47 + 38, a sum that carries, sampled by the
rung's sampler and scored by the rung's teacher (`distill.scored_by`): a completion that forgets the carry, and one of
the same group that carries it.""",
    """p_worst = viz.Predict("In the completion that forgets the carry, which token gets the most negative reward r_t?",
                      choices=("a digit of the first line (the units)", "the carried digit", "the end token"))
p_worst.answer = None      # your prediction, before you run on""",
    """forgot, carried = lab.forgot_and_carried(kls.recipe)   # π_ref of that run: the student before its first update
display(Image(data=views.teacher_reward_figure(forgot, carried)))
worst = int(forgot.rewards.argmin())
where = ("the carried digit" if worst == forgot.carry else "the end token" if worst == len(forgot.pieces) - 1
         else "a digit of the first line (the units)" if worst < lab.first_line(forgot.pieces) else "another token")
p_worst.check(where, why=f"r_t = {float(forgot.rewards[worst]):+.2f} on {forgot.pieces[worst]!r}, token {worst}: the "
                         f"teacher, who always carries, finds it {float(torch.exp(-forgot.rewards[worst])):,.0f} "
                         "times less likely than the student does")
tens = next(t for t in range(forgot.carry + 1, len(forgot.pieces)) if forgot.pieces[t].strip().isdigit())
print(f"the tens' sum after the forgotten carry, {forgot.pieces[tens]!r}: r_t = {float(forgot.rewards[tens]):+.2f}")
for s in (forgot, carried):
    print(f"{s.text.splitlines()[-1]!r}: Σ_t r_t = {float(s.rewards.sum()):+.2f} (= Â_0 at γ = 1: "
          f"{float(s.returns_1[0]):+.2f}); the carry's r_t {float(s.rewards[s.carry]):+.2f}; the first line's tokens: "
          f"|r_t| ≤ {float(s.rewards[:lab.first_line(s.pieces)].abs().max()):.2f}; GRPO's Â_i {s.grpo_advantage:+.2f}")""",
    r"""md:The teacher's reward is a map of where the student went wrong: nearly 0 wherever the two agree (the first line, the
format), strongly negative on the forgotten carry, positive on the carry that the student was unsure of and the teacher
is sure of. It also scores the tokens after the slip. There the teacher reads a prefix it would never have written
itself — "… + 0 =" — and the tens' sum that is right arithmetic on that prefix still gets a negative reward (printed
above): the teacher's opinion on the student's prefixes, not a rule.

The three credits differ in where they put that signal.

* **$\gamma = 1$** gives every token the sum of the rewards from it on: the first line, which
  was right, carries the whole completion's reverse KL. Right in expectation — an early token is answerable for where
  it leads, section 3 — but one sample's credit is as noisy as a whole-completion reward.
* **$\gamma = 0$** (the rung's default) gives each token its own $r_t$: the blame lands on the carry and the tokens
  after it only. Less noise in each token's credit (its own term, not the sum of every later one), and section 3
  shows which gradient it is; section 4 measures what it changes.
* **GRPO** gives every token of a completion the same $\hat A_i$, the first line's as large as the carry's, and a
  group whose completions are all right or all wrong gets $\hat A_i = 0$: no signal at all, where the teacher still
  scores every token.

## 2 · Forward, reverse and between: the generalized JSD

Exercise 28 scores only the token the student sampled. With the teacher's logits at hand, whole next-token
distributions can be compared at each position, $q = \pi_\theta(\cdot \mid y_{<t})$ and $p = \pi_{\text{teacher}}(\cdot \mid y_{<t})$:

$$\mathrm{KL}(p\,\|\,q) = \sum_v p_v \log\frac{p_v}{q_v} \;\;\text{(forward)}, \qquad
\mathrm{KL}(q\,\|\,p) = \sum_v q_v \log\frac{q_v}{p_v} \;\;\text{(reverse)}.$$

The forward KL pays $\log p_v/q_v$ wherever the **teacher** has mass: a $q$ that misses any of it pays without bound,
so $q$ spreads over all of it — **mass-covering** (supervised fine-tuning on the teacher's samples minimises it). The
reverse KL pays wherever the **student** has mass: a $q$ that puts mass where $p$ has none pays without bound, so $q$
hides inside what $p$ covers, and a $q$ too simple for all of $p$ picks one mode — **mode-seeking**. It is what the
sampled reward of section 1 estimates. GKD's generalized JSD (Agarwal et al. 2024; TRL's `GKDTrainer`, its
`GKDConfig.beta`) runs between them through the mixture $m = \beta p + (1 - \beta) q$:

$$\mathrm{JSD}_\beta(p, q) = \beta\,\mathrm{KL}(p\,\|\,m) + (1 - \beta)\,\mathrm{KL}(q\,\|\,m), \qquad
\beta = 0:\ \mathrm{KL}(p\,\|\,q), \qquad \beta = 1:\ \mathrm{KL}(q\,\|\,p)$$

(`core.generalized_jsd`; the two ends are computed as the two KLs, since $\mathrm{JSD}_\beta$ itself vanishes there).
This is exercise 29 (`ex29_generalized_jsd`).

The widget fits a student too simple for its teacher. $p$ has two modes over 30 tokens, 60 % of its mass on the left
one; the student family is one bump, $q_{c,w}(v) \propto \exp\!\big(-(v - c)^2/2w^2\big)$, of centre $c$ and width $w$.
For each $\beta$ the lab computes $\mathrm{JSD}_\beta(p, q_{c,w})$ on a fine grid of $(c, w)$ and fits $q$ by steepest
descent on that grid — from the start, to the best of the eight neighbouring points, until none is better — from two
narrow starts, one near each mode. The middle panel is the landscape with each descent's path; the right one where
each fit ends for every $\beta$, and the family's best (the grid's minimum).""",
    """p_mode = viz.Predict("At β = 1 (the reverse KL), the descent that starts on the right, near the smaller mode: where "
                     "does its bump end?", choices=("on the larger, left mode", "on the right mode",
                                                    "between the modes, covering both"))
p_mode.answer = None      # your prediction, before you run on""",
    """fits = lab.jsd_fits()
view = views.jsd_view(fits, beta=0.0)
display(view)
for beta in (0.0, 1.0):
    for name in lab.STARTS:
        fit = fits["fits"][beta][name]
        print(f"β = {beta:g}, {name} {lab.STARTS[name]}: centre {fit['centre']:.2f}, width {fit['width']:.2f}, "
              f"JSD_β {fit['value']:.4f}, mass on the left half {fit['left_mass']:.2f} (p: {fits['p_left_mass']:.2f})")
right = fits["fits"][1.0]["right start"]
p_mode.check("on the right mode" if right["centre"] > 14.5 and right["width"] < 4 else
             "on the larger, left mode" if right["centre"] < 14.5 and right["width"] < 4 else
             "between the modes, covering both",
             why=f"centre {right['centre']:.2f}: the reverse KL has a local minimum on each mode, and a descent "
                 f"stays in the basin it starts in (its JSD {right['value']:.3f} against the left mode's "
                 f"{fits['fits'][1.0]['left start']['value']:.3f})")
apart = [b for b, at in fits["fits"].items() if at["left start"]["path"][-1] != at["right start"]["path"][-1]]
switch = next(b for b, at in fits["fits"].items() if at["best"]["width"] < 4)
print(f"the two starts end in different minima from β = {min(apart):g} on; the family's best is one mode from "
      f"β = {switch:g} on")""",
    r"""md:At $\beta = 0$ both descents end on the same wide bump across both modes: the forward KL will not let $q$ miss any of
$p$'s mass, so it pays for the trough between the modes instead. At $\beta = 1$ each ends on the mode nearer its start,
and the mode it missed gets almost none of $q$'s mass: for the reverse KL the trough is the expensive place, and the
second mode is simply not its business. Which mode is found depends on where the student starts — for a language
model, on what it already writes. In between, the landscape holds both kinds of minimum, and the best of the family
switches from the wide bump to the larger mode at the $\beta$ printed above; narrow starts stay on their modes from a
smaller $\beta$ on. Slide $\beta$ and watch the landscape's valleys move.

For a student that can represent its teacher, every $\beta$ has the same minimum, $q = p$; the choice matters when it
cannot — the usual case when a small model learns from a large one. The reverse KL's mode-seeking is then a feature:
a student that writes one good answer well rather than a blur of all the teacher's answers.

## 3 · The policy gradient is the reverse-KL gradient

Section 1's reward is not a heuristic. With $\log\pi_\theta(y) = \sum_t \log\pi_\theta(y_t \mid y_{<t})$ and
$\mathbb{E}_{y\sim\pi_\theta}[\nabla\log\pi_\theta(y)] = 0$,

$$\nabla\,\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{teacher}})
= \nabla\,\mathbb{E}_{y\sim\pi_\theta}\Big[\log\frac{\pi_\theta(y)}{\pi_{\text{teacher}}(y)}\Big]
= \mathbb{E}_{y\sim\pi_\theta}\Big[\nabla\log\pi_\theta(y)\,\log\frac{\pi_\theta(y)}{\pi_{\text{teacher}}(y)}\Big]
= -\,\mathbb{E}_{y\sim\pi_\theta}\Big[\sum_t \nabla\log\pi_\theta(y_t \mid y_{<t}) \sum_{t' \ge t} r_{t'}\Big],$$

where the last step drops the rewards before $t$ (a token's score function has mean 0 given its prefix, so the rewards
already earned contribute nothing in expectation). That is the policy gradient with the rewards $r_t$ at $\gamma = 1$:
**descending the sequence's reverse KL is REINFORCE with the teacher's per-token reward**. At $\gamma = 0$ each token
keeps only its own $r_t$, and the same step gives, position by position,
$-\sum_t \mathbb{E}_{y_{<t}\sim\pi_\theta}\big[\nabla_\theta\,\mathrm{KL}\big(\pi_\theta(\cdot \mid y_{<t})\,\|\,\pi_{\text{teacher}}(\cdot \mid y_{<t})\big)\big]$
with the prefixes' distribution held fixed: GKD's $\beta = 1$ at the prefixes the student reaches. The difference is
what an early token answers for: at $\gamma = 1$ also for the KL of the positions it leads to.

Below, a language small enough to check this exactly: 2 tokens, 3 positions, each position's logits a table indexed
by the prefix (1 + 2 + 4 rows of 2 logits: 14 logits), a random student and a random teacher. All 8 completions are enumerated, so
each expectation is an exact sum (`tests/test_core_distillation.py` does the same on 2 positions of a 3-token
vocabulary).""",
    """why_first = viz.Reason("γ = 1 and γ = 0 give the same gradient at the last position but not at the first. Why?",
                       "the last position has the largest KL, so the discount does not matter there",
                       "at the last position nothing follows, so Σ_{t'≥t} r_t' = r_t; an earlier token's γ = 1 credit "
                       "also holds the rewards of the positions it leads to",
                       "γ = 0 drops the first position's reward",
                       "the teacher's logits at the first position are not used at γ = 0")
why_first.answer = None      # a letter, before you run on
why_first.ask()""",
    """grads = lab.enumerated_gradients()
display(Image(data=views.gradient_figure(grads)))
print(f"{grads['sequences']} completions of {grads['T']} tokens over {grads['V']} tokens; "
      f"{len(grads['position'])} logits in the student's tables")
print(f"max |−∇KL(π_θ‖π_teacher) − policy gradient at γ = 1| = {(grads['minus_kl'] - grads['pg_1']).abs().max():.1e}")
print(f"max |−∇GKD(β = 1) at the prefixes − policy gradient at γ = 0| = {(grads['minus_gkd'] - grads['pg_0']).abs().max():.1e}")
for t in range(grads["T"]):
    at = grads["position"] == t
    print(f"position {t + 1}: max |γ = 1 − γ = 0| = {(grads['pg_1'] - grads['pg_0'])[at].abs().max():.1e}")
why_first.check("b", why="G_t = r_t + γ·G_{t+1}: at the last position G = r_t whatever γ, and the rows above show "
                         "the two gradients equal there and apart before it")""",
    r"""md:Both identities hold to float64 rounding, and the two objectives are different: $\gamma = 1$ descends the KL of whole
sequences, $\gamma = 0$ each position's KL at prefixes it treats as given. At $\gamma = 0$ the sampled reward is
therefore a one-token, unbiased estimate of the gradient GKD computes over the whole vocabulary at $\beta = 1$: both
run the teacher over the student's completions, but GKD reads its whole next-token distribution at every position
(exact at each prefix, and $V$ numbers to keep per position), the sampled reward one log-prob per token. In
`python -m ladder.run distill`, `--discount 0` (the default) and `--discount 1` are these two
($\gamma$ in between mixes them), each completion's term scaled as `--loss-type` aggregates it.""",
    r"""md:## 4 · Off-policy against on-policy, per unit of compute

Four ways to make the tiny student carry (five arms: on-policy distillation at two $\gamma$), each from the same start,
on the same sums, for the same 30 updates of 8 sums × 4 completions — every arm is the distill rung's own recipe, only the rollout (who samples) and the credit
(which $\hat A_t$) changed, through the same `grpo_step` and `core.update`:

| arm | who samples | each token's $\hat A_t$ |
|---|---|---|
| **SFT on the teacher's samples** (off-policy distillation) | the teacher | 1 on every token the teacher wrote: at $\mu = 1$ the ratio is 1 and the clipped surrogate's gradient is the log-likelihood's, $\nabla \sum_t \log\pi_\theta(y_t)$ (each completion's divided by its length, as `--loss-type grpo` aggregates) |
| **on-policy distillation**, $\gamma = 0$ (the rung's default) and $\gamma = 1$ | the student | the teacher's per-token rewards (section 1) |
| **GRPO** | the student | the correctness reward's group-relative $\hat A_i$ on every token |
| **distillation, then GRPO** | the student | the teacher's for 15 updates, then the correctness reward's |

Compute is **counted, not modelled**: a hook on each model's transformer counts the token positions of every forward
pass — sampling (one position per new token), scoring, and training (3×: a forward and a backward of twice its cost) —
and the FLOPs are 2 × the model's parameters × positions (the student's 0.91 M with its LoRA adapter, the teacher's
0.78 M). Per update that is about 1,045 positions sampled, 1,160 trained and, for distillation, 1,160 scored by the
teacher and 1,160 by the student itself: the rewards need the student's log-probs before the update. GRPO and SFT pay no
such pass — at $\mu = 1$ `core.update` takes $\pi_{\text{old}}$'s log-probs from its own training forward, detached.
The held-out evaluations (every 5 updates: "GFLOPs to 0.9" is read there) are measurement and are not counted. The
teacher here has the student's size; with a teacher four times larger, every teacher position costs four.

`benchmarks/distill_compare.py` ran every arm for seeds 0, 1 and 2, each under the three CPU kernel variants that round
as other CPUs do; the cell below reads its results (`benchmarks/distill_compare_results.json`) and says only what held
on **every** one of those runs. The figure draws the native runs. (On this tiny model the three variants' rounding
never flipped a sampled token: every seed ended at the same evaluations under all three, so each count of 9 runs is
3 seeds' outcomes, each seen three times; the cell checks it.)""",
    """from ladder.viz import distill_study as study
from ladder.viz._widget import render_png

results = study.seed_study()
native = [run for run in results["runs"] if run["variant"] == "native"]
display(Image(data=render_png(study.figure(native, results["arms"]))))
print(f"{'arm':34} {'runs':>4}  {'accuracy at the end':>19}  {'reached ' + str(study.LEVEL):>12}  "
      f"{'GFLOPs to ' + str(study.LEVEL):>14}  {'GFLOPs in all':>13}")
for row in study.arm_table(results):
    print(f"{row['label']:34} {row['runs']:>4}  {row['end']:>19}  {row['reached']:>12}  {row['gflops_to_level']:>14}  "
          f"{row['gflops_total']:>13}")
print(f"\\nstart: {study.spread([study.curve(r)[1][0] for r in results['runs']])} held-out accuracy; "
      f"the teacher: {study.spread([r['teacher_accuracy'] for r in results['runs']])}")
same = all(len({str(r["evals"]) for r in results["runs"] if (r["arm"], r["seed"]) == (arm, seed)}) == 1
           for arm in results["arms"] for seed in (0, 1, 2))
print("the three CPU variants " + ("ended every arm and seed at the same evaluations" if same else
                                   "ended some arm and seed at other evaluations: the runs differ"))
print("\\nheld on every run (with a margin of 10% of the compute):")
for sentence in study.held_everywhere(results, study.reached, f"reached {study.LEVEL} with less compute"):
    print("  ", sentence)""",
    r"""md:Read the table before the story you expected. On this task **the cheapest teacher is the plainest**: the
student copying the teacher's own samples (SFT) and GRPO's one number per completion get the student to the teacher in
the fewest FLOPs, and on-policy distillation — which pays, every update, for the teacher's forward over the student's
samples and for the student's own scoring forward — comes after them. The tiny task is why. The student has the
teacher's size and architecture, and what it lacks is one skill that every sum that carries shows in full: imitation
has nothing it cannot copy, and the correctness reward already tells a carried sum from a forgotten one in most
groups. What this task does not test is where on-policy distillation is said to pay: a student much smaller than its
teacher, long chains where one early slip leaves the student on prefixes the teacher would never write, a task with no
verifier. Nothing here measures those; the study measures only the tiny case.

Within on-policy distillation, does the discount matter? Section 1 said why $\gamma = 0$ might learn faster — at
$\gamma = 1$ the first line of a completion is blamed for a carry it did not forget — and section 3 that each is
unbiased for its own objective (the whole sequence's KL, each position's); unbiased is not the same as quick. The next cell compares the two run by run (the same seed and CPU variant),
on the compute to reach the teacher's neighbourhood and on the largest fall of the held-out accuracy below its best so
far (the price of a noisy credit would be a student that learns and then stumbles). Each count is over the 9 runs
(3 seeds × 3 variants).""",
    """def largest_fall(run):
    accuracy = study.curve(run)[1]
    return max(max(accuracy[:i + 1]) - a for i, a in enumerate(accuracy))   # below the best so far

for what, value in (("the compute to reach " + str(study.LEVEL), study.reached),
                    ("the largest fall of held-out accuracy below its best so far", largest_fall)):
    counts = study.paired(results, "distill", "distill_g1", value)
    print(f"γ = 0 against γ = 1, {what}: better on {counts['lower']} runs, within 10% on {counts['same']}, "
          f"worse on {counts['higher']}")""",
    r"""md:The first line is what the rung's default rests on: $\gamma = 0$ got to 0.9 sooner on two seeds and with the same
compute on the third. The second does not follow the story: at $\gamma = 0$ the accuracy fell further below its best
on two seeds of three. These falls are a few hundredths, and an evaluation of 200 sums moves by about ±0.03 on its own
— the noise of the credit shows in the speed here, not in the stumbles.

**Drift: where the student leads.** SFT trains the student on the teacher's prefixes only. At test time the student
writes its own, and the question is how far the teacher finds it there. After training, on held-out sums, the study
measured each student's KL to the teacher per token twice: on the **teacher's** samples (the forward KL, what SFT
minimises) and on the student's **own** samples (the reverse KL, what on-policy distillation minimises).""",
    """print(f"{'arm':34} {'KL on the teacher':>17} {'KL on its own':>14} {'own samples':>12}")
print(f"{'':34} {'samples (forward)':>17} {'(reverse)':>14} {'correct':>12}")
for row in study.drift_rows(results):
    print(f"{row['label']:34} {row['forward_kl_teacher_samples']:>17} {row['reverse_kl_own_samples']:>14} "
          f"{row['own_samples_correct']:>12}")
low, high = study.own_over_teacher(results)
teacher_correct = study.spread([r["probe"]["teacher_samples_correct"] for r in results["runs"]])
print(f"\\non its own samples the student is {low:.1f} … {high:.1f}× further from the teacher per token than on the "
      f"teacher's, on every run of every arm; the teacher's own samples are correct {teacher_correct} of the time")
for sentence in study.held_everywhere(results, lambda run: run["probe"]["student_samples_reverse_kl"],
                                      "ended nearer the teacher on its own samples"):
    print("  ", sentence)""",
    r"""md:That ratio is the lesson of off-policy training in one number: a loss measured on the teacher's prefixes
(the forward KL, or SFT's NLL) says the student is close, and on the prefixes the student writes itself the teacher
disagrees several times more — for every way of training here, the on-policy ones included, since 30 updates do not
close the gap. And here the plainest teacher won on that measure too: SFT's student, trained only on the teacher's
prefixes, ended nearer the teacher **on its own samples** — the very quantity on-policy distillation minimises — than
either distillation arm, on every run (the printed lines). On this task, training on the student's own samples did not
close the gap faster than copying the teacher; what would make it (a student that cannot copy its teacher, long chains
that leave the teacher's prefixes early) is what the task lacks.""",
    r"""md:## 5 · Running the rung

```bash
python -m ladder.run distill --preset tiny                                 # the tiny student and its tutor's model, on a CPU
python -m ladder.run distill --preset tiny --discount 1 --out distill-gamma1  # the whole completion's KL (section 3's γ = 1)
python -m ladder.doctor runs/distill-tiny-seed0 distill-gamma1 --plot     # the vital signs, the two runs compared
python -m ladder.run distill --preset tiny --export-trl distill_trl.py     # the same run as a TRL script; trains nothing
python -m ladder.run distill --qlora                                        # Qwen2.5-1.5B-Instruct teaches Qwen2.5-0.5B-Instruct on GSM8K
```

The last one is the users' default: `--model Qwen/Qwen2.5-0.5B-Instruct` (4-bit with `--qlora`, LoRA on top) learns
from `--teacher Qwen/Qwen2.5-1.5B-Instruct` on `openai/gsm8k`. The teacher must share the student's tokenizer (it
scores the student's own tokens; another vocabulary is refused in one line), and it must not be the student itself
(every reward would be 0). Every grpo option applies: `--group-size`, `--loss-type`, `--mu`, and `--kl-coef` to put
$\pi_{\text{ref}}$ back as an anchor beside the teacher. `--export-trl FILE` writes the run as a script for TRL's
`GKDTrainer` (`trl.experimental.gkd`) instead of training it: the student's own samples (`lmbda = 1`) and the reverse KL
at each position (`beta = 1`) — section 3's $\gamma = 0$, computed over the whole vocabulary instead of sampled. What
has no GKD setting ($\gamma > 0$, the clipped surrogate and $\pi_{\text{old}}$, the rule rewards) is listed in the
script's comments.

A run writes what every rung writes (`metrics.jsonl` one line per update, `summary.json`, `curves.png`): grpo's fields,
and `distill/reverse_kl` (section 0's third panel), `distill/teacher_logp` (the teacher's mean log-prob of the student's
tokens) and, every `--eval-every` updates, the greedy held-out accuracy of the student beside the teacher's. The cell
below prints the panels of `curves.png`, the vital signs `python -m ladder.doctor RUN` draws for this rung, and what
`--export-trl` writes. Every `--print-samples` updates a line shows one completion with its rule reward (0 at
`--reward-weights 0`), its correctness and its reverse KL to the teacher; `completions.jsonl` keeps all of them. On the
tiny preset the doctor finds the run healthy; its one note, `clip_zero`, says the clip never acted — at $\mu = 1$
with one minibatch it cannot (section 0). A teacher that is a copy of the student is its `nothing_to_teach`.""",
    """from ladder.doctor import vitals

print("curves.png:", "; ".join(f"{panel.title} ({', '.join(panel.lines)})" for panel in distill.CURVES))
print("the doctor's vital signs for distill:")
for vital in vitals.of_rung("distill"):
    print(f"   {vital.title} — {' '.join(vital.unit.split())}: {', '.join(vital.lines)}")
export = distill.RUNG.export
print("--export-trl:", f"{export} writes the run as a trl script instead of training it" if export else
      "this version of the rung declares no exporter: it writes no TRL script")""",
    r"""md:**What to try next.**

* `--discount 1` against the default $\gamma = 0$, on two seeds each (`--seed`): which lowers the reverse KL faster per
  update, and which is noisier? Section 4 measured it on three seeds; a fourth and fifth are yours.
* `--kl-coef 0.05`: $\pi_{\text{ref}}$ back in the loss. The student is now pulled to the teacher and held near its
  start at once; watch the reverse KL and the held-out accuracy.
* `python -m ladder.run grpo --preset tiny`: the same student learning from the correctness reward alone, one number
  per completion (its preset samples 8 completions per sum where distill's samples 4). Compare the held-out accuracy
  of the two runs' `curves.png` update by update.
* A teacher far larger than its student (`--teacher`: a local directory or hub id with the student's tokenizer):
  section 2 says what a student too simple for its teacher does under the reverse KL — it settles on what it can do
  well rather than a blur of everything the teacher does.""",
    SELF_CHECK,
    """p_r = viz.Predict("A token the student gives log-prob −0.2 and the teacher −3.0: its reward r_t?", decimals=1)
p_r.answer = None
p_g = viz.Predict("A completion of 3 tokens with rewards r = (0, −2, −1): the first token's Â at γ = 1?", decimals=1)
p_g.answer = None
why_sft = viz.Reason("Fine-tuning the student on completions the teacher sampled (SFT) minimises which KL, in "
                     "expectation, and what does that do to a student too simple for its teacher?",
                     "the reverse KL(π_θ‖π_teacher): the student picks one of the teacher's modes",
                     "the forward KL(π_teacher‖π_θ): the student spreads over all the teacher's modes, and puts mass "
                     "between them where the teacher puts none",
                     "no KL: SFT maximises the likelihood, which is unrelated to a KL",
                     "the generalized JSD at β = 0.5")
why_sft.answer = None
for question in (p_r, p_g, why_sft):
    question.ask()
    print()""",
    """p_r.check(core.distillation_rewards(torch.tensor([[-0.2]]), torch.tensor([[-3.0]]), torch.ones(1, 1)).item(),
          why="r_t = −(log π_θ − log π_teacher) = −(−0.2 − (−3.0)): the student is surer than the teacher")
rewards = torch.tensor([[0.0, -2.0, -1.0]])
p_g.check(core.discounted_returns(rewards, torch.ones_like(rewards), 1.0)[0, 0].item(),
          why="Σ_{t'≥1} r_t' = 0 − 2 − 1: at γ = 1 the first token answers for the whole completion")
why_sft.check("b", why="the average of −log π_θ(y) over y ~ π_teacher is KL(π_teacher‖π_θ) plus the teacher's "
                       "entropy, a constant: section 2's β = 0, the wide bump")
viz.tally(p_zero, p_worst, p_mode, why_first, p_r, p_g, why_sft)""",
]
