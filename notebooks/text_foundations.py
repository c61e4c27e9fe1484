# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 1b: the foundations — V, Q and A; Monte-Carlo, TD(0) and GAE(λ); termination vs
time-limit truncation; the surrogate and its trust region — on a chain solved exactly (``ladder.viz.foundations``).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["1b_foundations"] = [
    r"""md:# 1b · Foundations: values, bootstrapping and the surrogate

After this notebook (about 45 minutes; it runs in seconds, no model) you will be able to:

* compute $V$, $Q$ and $A$ of a policy exactly from the Bellman equations, and say why $\mathbb{E}_{a\sim\pi}[A(s, a)] = 0$;
* estimate values from sampled episodes by Monte-Carlo, TD(0) and GAE($\lambda$), and say which $\lambda$ to pick when;
* bootstrap a time-limit truncation or a rollout's edge with $V(s_T)$, and not a termination;
* show that PPO's surrogate has the policy gradient as its gradient at $\theta_{\text{old}}$, and why it is trusted only near $\theta_{\text{old}}$.

Notebook 1 weighted each $\log\pi_\theta$ by a return; notebook 2 weights it by an advantage from a critic,
reuses each batch $\mu$ times and clips. This notebook builds the pieces between, on a problem small enough to
solve exactly, so every estimate can be held against the truth.

**The chain.** States $0, 1, \dots, n-1$ in a row; two actions, left and right; reward $r = 1$ for every step,
the last one included; a step off either end **terminates** the episode. It is CartPole in miniature: +1 per
step until you fall. Episodes start in $s_{\text{start}}$ and rewards are discounted by $\gamma$ (both printed
below). The policy is a table of logits, $\pi_\theta(a\mid s) = \mathrm{softmax}(\theta[s])_a$; until the last
section it is the uniform one ($\theta = 0$: left or right with probability $\tfrac12$).

**Predictions.** Some cells ask you to predict before the cell that computes the answer: set `.answer` there,
then run on; a later cell checks it (`viz.Predict`, `viz.Reason`). Cells with `...` are yours to compute; the
cell after checks your value and then shows the notebook's own. Unanswered, they say so and move on.""",
    """import torch
from IPython.display import Markdown, display

from ladder import core, viz
from ladder.viz import foundations as fd

torch.set_printoptions(precision=3, sci_mode=False)
chain = fd.Chain()
pi = fd.policy(fd.uniform(chain))                  # π(a|s), [n_states, 2]: columns left, right
P, r = chain.transitions(), chain.rewards()        # P[s, a, s'], r[s, a]
print(chain)
pi""",
    r"""md:## Returns, V, Q and A

The **return** from step $t$ is $G_t = \sum_{k\ge 0}\gamma^k r_{t+k}$. Its expectations name the three functions
the rest of the course uses:

$$V^\pi(s) = \mathbb{E}_\pi[G_t \mid s_t = s], \qquad Q^\pi(s, a) = \mathbb{E}_\pi[G_t \mid s_t = s, a_t = a], \qquad A^\pi(s, a) = Q^\pi(s, a) - V^\pi(s).$$

One step of the return, $G_t = r_t + \gamma G_{t+1}$, gives the **Bellman equations**:

$$Q(s, a) = r(s, a) + \gamma\sum_{s'} P(s'\mid s, a)\,V(s'), \qquad V(s) = \sum_a \pi(a\mid s)\,Q(s, a).$$

A terminal state has $V = 0$: here a step off the end lands on no state, so for that $(s, a)$ the probabilities
$P(s'\mid s, a)$ sum to 0. With
$P_\pi(s, s') = \sum_a \pi(a\mid s)P(s'\mid s, a)$ and $r_\pi(s) = \sum_a\pi(a\mid s)r(s, a)$, the equations for
$V$ are linear, $V = r_\pi + \gamma P_\pi V$, and one solve gives them all: $V = (I - \gamma P_\pi)^{-1} r_\pi$.""",
    """exact = fd.exact_values(chain, pi)                # the linear solve above; also Q and A
V = exact["V"]
print("V =", V)
episodes = fd.sample_episodes(chain, pi, episodes=4000, max_steps=80, seed=0)
G = core.discounted_returns(episodes["rewards"], episodes["mask"], chain.gamma)   # notebook 1's G_t
print(f"Monte-Carlo: mean G_0 over {len(G)} episodes = {G[:, 0].mean():.3f} ± {G[:, 0].std() / len(G) ** 0.5:.3f}"
      f"  vs  V(s_start) = {V[chain.start]:.3f}")""",
    """p_adv = viz.Predict("In state 0, at the left end, is the advantage A(0, right) of stepping right positive or negative?",
                    choices=("positive", "negative"))
p_adv.answer = None      # your prediction, before you run on""",
    r"""md:Your turn: $Q$ from $V$ with the first Bellman equation, as a `[n_states, 2]` tensor (`torch.einsum` reads
$\sum_{s'} P[s, a, s']\,V[s']$ as `"sat,t->sa"`).""",
    """Q_yours = ...             # Q(s, a) = r(s, a) + γ Σ_s' P[s, a, s'] V(s')""",
    """Q = exact["Q"]
viz.check_computed(Q_yours, Q, how="r + chain.gamma * torch.einsum('sat,t->sa', P, V)")
A = Q - V[:, None]
print("A =", A)
p_adv.check("positive" if A[0, 1] > 0 else "negative",
            why=f"Q(0, left) = {Q[0, 0]:.3f} is one reward and the end; Q(0, right) = {Q[0, 1]:.3f} keeps the episode going")""",
    """r_mean = viz.Reason("Why is Σ_a π(a|s) A(s, a) = 0 in every state, whatever the policy?",
                     "every reward on this chain is 1, so both actions of a state earn the same one-step reward and "
                     "their Q's differ only by discounting, which π's average removes",
                     "the chain is symmetric: each state's advantage of going left is mirrored by one of going right "
                     "with the opposite sign, so the two cancel under any π",
                     "V(s) is the π-average of Q(s, ·) (the second Bellman equation), so Q(s, ·) − V(s) has "
                     "π-average V(s) − V(s) = 0")
r_mean.answer = None     # "a", "b" or "c\"""",
    """print("E_π[A(s, ·)] per state:", (pi * A).sum(-1))
r_mean.check("c", why="Σ_a π(a|s) (Q(s, a) − V(s)) = V(s) − V(s); notebook 1's baseline rests on the same identity")""",
    r"""md:## Monte-Carlo, TD(0) and GAE($\lambda$)

A training run never has the exact $V$: a critic $\hat V$ learns it from sampled episodes, and the advantages
come from both. Three targets for $V(s_t)$, from one episode:

* **Monte-Carlo**: the return $G_t$. Unbiased, but it carries the randomness of every later action and reward.
* **TD(0)**: $r_t + \gamma\hat V(s_{t+1})(1 - d_t)$. One step of randomness, then it trusts the critic (*bootstrapping*): its bias is the critic's error one step on, $\gamma\,\mathbb{E}\big[(1 - d_t)(\hat V - V)(s_{t+1})\big]$.
* **GAE($\lambda$)** in between. With the **TD error**

$$\delta_t = r_t + \gamma\,\hat V(s_{t+1})(1 - d_t) - \hat V(s_t) \qquad (d_t = 1 \text{ when step } t \text{ terminated}),$$

$$\hat A_t = \sum_{l\ge 0}(\gamma\lambda)^l\,\delta_{t+l}, \qquad R_t = \hat A_t + \hat V(s_t)\ \text{(the critic's target)}.$$

At $\lambda = 0$, $\hat A_t = \delta_t$ and $R_t$ is the TD(0) target. At $\lambda = 1$ the sum telescopes — each
$\gamma\hat V(s_{t+l+1})$ cancels the next $-\hat V$ — to $\hat A_t = G_t - \hat V(s_t)$, and $R_t = G_t$.
`core.gae` computes the sum backwards: $\hat A_t = \delta_t + \gamma\lambda(1-d_t)\hat A_{t+1}$.

Below the critic is off on purpose: $\hat V = V/2$.""",
    """critic = 0.5 * V
deltas = fd.td_errors(episodes, critic, chain.gamma)     # δ_t, [B, T]; 0 after an episode's end
lam = 0.9
lengths = episodes["mask"].sum(1).long()
ep = int((lengths >= 6).nonzero()[0])            # the first episode of 6 steps or more
length = int(lengths[ep])
print(f"episode {ep}: {length} steps, states {episodes['states'][ep, :length].tolist()}")
print("δ_t =", deltas[ep, :length])""",
    r"""md:Your turn: $\hat A_0$ of episode `ep` at $\lambda = 0.9$, as the weighted sum of its $\delta$'s. Compute it in code
from `deltas[ep, :length]`, `chain.gamma` and `lam`: the printout rounds to 3 decimals, and the check wants the sum to
$10^{-6}$.""",
    """adv0_yours = ...          # Σ_t (γλ)^t δ_t over episode ep""",
    """adv, ret = fd.gae_returns(episodes, critic, chain.gamma, lam)    # core.gae on this batch
viz.check_computed(adv0_yours, adv[ep, 0], how="((chain.gamma * lam) ** torch.arange(length) * deltas[ep, :length]).sum()")
td_target = fd.gae_returns(episodes, critic, chain.gamma, 0.0)[1]
mc_return = fd.gae_returns(episodes, critic, chain.gamma, 1.0)[1]
v_next = torch.cat([critic[episodes["states"][:, 1:]], torch.zeros(len(G), 1, dtype=G.dtype)], 1)
one_step = (episodes["rewards"] + chain.gamma * v_next * (1 - episodes["dones"])) * episodes["mask"]
print(f"λ = 0: R_t − (r_t + γV̂(s_t+1)) is at most {(td_target - one_step).abs().max():.1e}")
print(f"λ = 1: R_t − G_t is at most {(mc_return - G).abs().max():.1e}")""",
    """p_lam = viz.Predict("With the exact critic (c = 0) and n = 10 episodes, which λ gives the smaller squared error "
                    "for V(s_start): λ = 0 or λ = 1?", choices=("λ = 0", "λ = 1"))
p_lam.answer = None      # your prediction""",
    r"""md:**Predict first.** (Answer `p_lam` above.) The widget estimates $V(s_{\text{start}})$ by the average of $R_0$
over $n$ episodes, for each $\lambda$, with the critic $\hat V = (1 - c)V$. The squared error of that average is
$\text{bias}^2 + \text{variance}/n$; the curves come from 4000 episodes. It starts at $c = 0$; then move $c$ and $n$:
where does the lowest point go?""",
    """fd.lambda_view(lam=0.9, episodes=10, critic_error=0.0)""",
    """stats = {c: fd.estimator_stats(chain, c, [0.0, 0.5, 0.9, 1.0]) for c in (0.0, 0.5)}
for c, s in stats.items():
    print(f"c = {c}, λ = 0, 0.5, 0.9, 1: bias {s['bias'].round(3)} (± {s['stderr'].round(3)}), variance {s['var'].round(3)}")
mse = stats[0.0]["bias"] ** 2 + stats[0.0]["var"] / 10
p_lam.check("λ = 0" if mse[0] < mse[-1] else "λ = 1",
            why=f"squared error {mse[0]:.3f} at λ = 0 vs {mse[-1]:.3f} at λ = 1, with n = 10 and the exact critic")""",
    r"""md:<details><summary>Answer</summary>

With the exact critic every $\lambda$ aims at the right value (the printed biases at $c = 0$ are of the size
of their standard errors, the $\pm$), so only the variance counts, and it is smallest where the fewest random steps enter: at
$\lambda = 0$. With $c = 0.5$ the TD target inherits the critic's error (the printed bias at $\lambda = 0$) while
$\lambda = 1$ never reads the critic: the same bias at both $c$. Bias does not shrink with $n$, variance does —
so with many episodes and a poor critic $\lambda$ near 1 wins. A critic in training is somewhere between, which
is why notebook 2's rungs take $\lambda$ as an option (`--gae-lambda`).
</details>

### Explained variance

Notebook 2's runs print the critic's **explained variance**, $1 - \mathrm{Var}[R - \hat V]/\mathrm{Var}[R]$ over the
batch's steps (`core.explained_variance`): 1 is a critic that explains every return, 0 one no better than a
constant.""",
    """p_ev = viz.Predict("Against the Monte-Carlo returns of these episodes, is the explained variance of the *exact* V above 0.9?",
                   choices=("yes", "no"))
p_ev.answer = None       # your prediction""",
    """states, mask = episodes["states"], episodes["mask"]
ev = {name: core.explained_variance(v[states], G, mask) for name, v in
      {"exact V": V, "V + 3": V + 3, "V / 2": V / 2, "a constant": torch.full_like(V, V.mean().item())}.items()}
for name, value in ev.items():
    print(f"explained variance of {name:<10}: {value:+.3f}")
p_ev.check("yes" if ev["exact V"] > 0.9 else "no",
           why=f"{ev['exact V']:.3f}: most of a return's variance is the randomness of the actions still to come")""",
    r"""md:Even the exact $V$ explains a small share here: from one state the return still varies with every action the
uniform policy has yet to take, and no function of $s_t$ can explain that. Adding a constant to the critic
changes nothing (compare the first two lines), and a constant critic scores 0. So read the number as a
trend within one run, not against 1.

## Termination vs time-limit truncation

`gymnasium`'s `step` returns two flags. `terminated`: the task ended (the pole fell; here, a step off the
chain). `truncated`: *we* stopped — a time limit (CartPole-v1's 500 steps), the end of a rollout — while the
episode could have gone on.

**Predict first** (`p_trunc`, next cell): cut the chain's episodes at $T = 5$ steps and treat every cut as if the
task had ended there. Is the mean return-based estimate of $V(s_{\text{start}})$ then too low, about right, or too high?""",
    """p_trunc = viz.Predict("With a time limit of T = 5, will treating the cut as a termination make the mean estimate "
                      "of V(s_start) too low, about right, or too high?", choices=("too low", "about right", "too high"))
p_trunc.answer = None    # your prediction, before you read on""",
    r"""md:A termination's next state is terminal, $V = 0$, so $d_t = 1$ and the target is $r_t$. A truncated state $s_T$
has a future the episode did not see. Its step bootstraps:

$$\text{terminated: } R_{T-1} = r_{T-1}, \qquad \text{truncated: } R_{T-1} = r_{T-1} + \gamma V(s_T).$$

`core.gae` takes `dones` (1 only where the task ended) and `last_values`, the $V(s_T)$ of a row cut at the edge of
the tensor. The CartPole rung, whose environments reset inside a rollout, marks a truncated step done and adds
$\gamma V(s_T)$ to its reward: the same target. Below, episodes are cut at $T = 5$ steps.""",
    """cut = fd.sample_episodes(chain, pi, episodes=4000, max_steps=5, seed=1)
row = int(cut["truncated"].nonzero()[0])          # the first episode the time limit cut
print(f"{cut['truncated'].mean():.0%} of the episodes are cut by the limit; row {row} is one, "
      f"ending in state s_T = {int(cut['last_state'][row])}")""",
    r"""md:Your turn: the value target $R_{T-1}$ of row `row`'s last step, using the exact `V`. Compute it in code from
`V`, `chain.gamma` and `cut['last_state'][row]` (each step's reward is 1): the check wants it to $10^{-6}$, finer than
any printout above.""",
    """target_yours = ...        # r_{T-1} + γ V(s_T)""",
    """ret_cut = fd.gae_returns(cut, V, chain.gamma, 0.0)[1]
viz.check_computed(target_yours, ret_cut[row, -1], how="1 + chain.gamma * V[cut['last_state'][row]]")
limit = fd.time_limit_values(gamma=0.99, limit=500)
display(Markdown("CartPole, γ = 0.99, a policy that never drops the pole: V at every step, and what a critic learns "
                 "if the 500-step limit counts as a termination\\n\\n| step t | V | as terminated |\\n|---:|---:|---:|\\n" +
                 "\\n".join(f"| {t} | {limit['v_true']:.1f} | {v:.1f} |" for t, v in zip(limit["steps"], limit["as_terminated"]))))""",
    """r_clock = viz.Reason(f"A critic taught with the time limit as a termination should learn {limit['as_terminated'][-1]:.1f} at "
                      f"step {limit['steps'][-1]} and {limit['as_terminated'][0]:.1f} at step {limit['steps'][0]}. Why can it not?",
                      "CartPole's observation holds no clock: a state at step 10 and the same state at step 499 look "
                      "alike, so the critic must give them one value",
                      "states near step 499 are rare in its batches (few episodes last that long), so the regression "
                      "has too few samples there to fit them",
                      "with γ = 0.99 a bootstrapped target carries the limit's 0 back only about 1/(1 − γ) = 100 steps, "
                      "so the early steps never learn of it")
r_clock.answer = None    # "a", "b" or "c\"""",
    """r_clock.check("a", why="it fits something between the two for every state: wrong everywhere, not only near the limit")""",
    r"""md:**Predict first.** (You answered `p_trunc` above; the cell below the widget checks it.) The widget estimates $V(s_{\text{start}})$ by the mean $\lambda = 1$
target $R_0$ over 4000 episodes cut at $T$, bootstrapping with the exact $V$ at the cut or treating the cut as a
termination. Move $T$: which curve stays on the exact value?""",
    """fd.truncation_view(limit=5)""",
    """t5 = fd.truncation_estimates(chain, [5])
low, high = t5["v_true"] - 4 * t5["stderr"][0], t5["v_true"] + 4 * t5["stderr"][0]
as_term = t5["as_terminated"][0]
p_trunc.check("too low" if as_term < low else "too high" if as_term > high else "about right",
              why=f"{as_term:.3f} against V(s_start) = {t5['v_true']:.3f}; bootstrapped: {t5['bootstrapped'][0]:.3f}")""",
    r"""md:<details><summary>Answer</summary>

Treating the cut as a termination sets the future after $s_T$ to 0, and on this chain every future step is worth
+1: the estimate falls short by $\gamma^T V(s_T)$ on every cut episode, and more episodes are cut the shorter the
limit. Bootstrapping adds back $\gamma^T V(s_T)$, whose expectation is exactly what was cut off, so with the exact
$V$ it is unbiased at every $T$ (up to sampling noise). With a learned $V$ it is as right as the critic.
</details>""",
    r"""md:## Where episodes and completions end

The capstones (`exercises/capstone1_ppo_cartpole.py`, `capstone2_grpo.py`) ask you to write these edges yourself.

**The rollout's edge.** A rollout of $T$ steps per env cuts episodes too: its last step is where *we* stopped
collecting, and the episode goes on into the next rollout unless the env said it ended. So each row's last step is one
of three:

* **terminated**: $d_{T-1} = 1$; nothing to bootstrap, the target is $r_{T-1}$;
* **truncated** by the time limit: bootstrap with $V$ of the state the episode reached, $r_{T-1} + \gamma V(s_T)$;
* **neither** — the rollout's edge cut an episode still running: the same bootstrap, with $V$ of the observation the
  env returned after the last step (where the next rollout starts), given to `core.gae` as `last_values`.

One row of three steps, $r_t = 1$, with a critic's $\hat V$ made up for the example:""",
    """V_row, V_after = torch.tensor([[2.0, 1.5, 1.0]]), torch.tensor([0.8])     # V̂(s_0..s_2); V̂ of the state after s_2
ones = torch.ones(1, 3)
for name, dones, last in (("terminated at the last step", torch.tensor([[0.0, 0.0, 1.0]]), None),
                          ("cut by the rollout's edge", torch.zeros(1, 3), V_after)):
    R = core.gae(ones, V_row, dones, chain.gamma, 0.0, last_values=last)[1]     # λ = 0: R_t = r_t + γ V̂(s_t+1)(1 − d_t)
    print(f"{name:28s} R = {[round(x, 3) for x in R[0].tolist()]}")
print(f"the last target: 1 against 1 + γ·{V_after.item():.1f} = {1 + chain.gamma * V_after.item():.3f}")""",
    r"""md:**Vector envs.** gymnasium's `SyncVectorEnv` steps $N$ envs together and resets an env whose episode ended by
itself. Ask for `autoreset_mode=gym.vector.AutoresetMode.SAME_STEP` (gymnasium ≥ 1.1; the Capstone I contract and the
CartPole rungs do): then the `step` at which env $i$ ends already returns the **new** episode's first observation in
`obs[i]`, and the ended episode's last one — the $s_T$ a truncation bootstraps from — in `info["final_obs"][i]`, set
where `info["_final_obs"][i]` is True. (gymnasium's default mode handles the end otherwise; notebook 2 puts the two
side by side.) Two CartPoles with a time limit of 5 steps, pushed right at every step:""",
    """import gymnasium as gym
import numpy as np

envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=5)] * 2,
                                autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
obs, info = envs.reset(seed=0)
for t in range(5):
    obs, reward, terminated, truncated, info = envs.step(np.ones(2, dtype=np.int64))
print(f"step {t}: terminated {terminated}, truncated {truncated}, info['_final_obs'] {info['_final_obs']}")
print("env 0's last state, info['final_obs'][0]:", info["final_obs"][0].round(3))
print("env 0's new first state, obs[0]:         ", obs[0].round(3))
envs.close()""",
    r"""md:**Completions.** A language model's rollout is a batch of completions, and the same questions come back as tokens:

* **Padding.** Prompts of different lengths are padded on the **left** for generation, `tokenizer.padding_side =
  "left"`, so that every row's next token is drawn from the same, last column. GPT-2 and many others ship without a
  pad token: `tokenizer.pad_token = tokenizer.eos_token`. The attention mask (0 on the pads) keeps them out of every
  forward.
* **After the EOS.** A row that drew its end-of-sequence token is done, while the batch steps on: feed it pad tokens
  and give them mask 0, so they stay out of the loss, the log-probs, the KL and the reward's text. The EOS itself is
  an action (mask 1): it is how the model learns to stop. With pad = EOS the mask cannot be `ids != pad_token_id`,
  which drops the EOS too: it is 1 up to and including each row's first EOS.
* **Temperature.** A sampler at temperature $\tau$ draws from $\operatorname{softmax}(z/\tau)$, so the log-prob to record is
  $\log\operatorname{softmax}(z/\tau)[a]$, and every later scoring of that token ($\pi_{\text{old}}$, $\pi_\theta$, $\pi_{\text{ref}}$)
  divides by the same $\tau$ (`core.token_logp(..., temperature=τ)`): scored at another $\tau$, the ratio is not 1
  even before the first step.

The tiny GPT-2 of notebook 4 (its tokenizer loaded without a pad token, as GPT-2's comes):""",
    """from transformers import AutoTokenizer
from ladder.tasks import review_models

tokenizer = AutoTokenizer.from_pretrained(review_models.tiny_model_path(), pad_token=None, padding_side="right")
if tokenizer.pad_token is None:
    tokenizer.pad_token = tokenizer.eos_token          # pad = EOS; the attention mask hides the pads
tokenizer.padding_side = "left"                        # every prompt ends in the last column
enc = tokenizer(["a good film", "bad"], padding=True, return_tensors="pt")
print("input_ids", enc["input_ids"].tolist(), "\\nattention_mask", enc["attention_mask"].tolist())
eos = tokenizer.eos_token_id
ids = torch.tensor([[17, 23, eos, eos, eos],           # row 0 drew its EOS at step 2, then was fed pads (= EOS)
                    [31, 12, 40, 8, eos]])
is_eos = (ids == eos).long()
mask = (is_eos.cumsum(1) - is_eos == 0).float()        # 1 up to and including the first EOS
print("mask", mask.long().tolist(), "  ids != pad_token_id:", (ids != tokenizer.pad_token_id).long().tolist())
z = torch.randn(2, 5, 50, generator=torch.Generator().manual_seed(0))   # stand-in logits at each position, [B, T, V]
tau = 0.7
recorded = torch.log_softmax(z / tau, -1).gather(-1, ids[..., None]).squeeze(-1) * mask   # as the sampler records it
for t in (tau, 1.0):
    rescored = torch.log_softmax(z / t, -1).gather(-1, ids[..., None]).squeeze(-1) * mask
    print(f"rescored at τ = {t}: largest |ρ − 1| before any step {((rescored - recorded).exp() - 1).abs().max():.3f}")""",
    r"""md:## The surrogate and its trust region

Notebook 2's PPO does not differentiate $J(\theta) = V_\theta(s_{\text{start}})$; it maximises a **surrogate** built
from a batch that $\pi_{\text{old}}$ sampled, with the advantages of $\pi_{\text{old}}$:

$$\tilde J(\theta) = \mathbb{E}_{s, a\sim\pi_{\text{old}}}\big[\rho(\theta)\,\hat A\big], \qquad \rho(\theta) = \frac{\pi_\theta(a\mid s)}{\pi_{\text{old}}(a\mid s)}.$$

($\rho$, the importance ratio; $r$ stays the reward. $\tilde J$, the surrogate of $J$, is maximised; the course keeps $L$
for losses, which are minimised.)

At $\theta = \theta_{\text{old}}$, $\nabla_\theta \rho = \nabla_\theta\pi_\theta/\pi_{\text{old}} = \nabla_\theta\log\pi_\theta$, so
$\nabla \tilde J(\theta_{\text{old}}) = \mathbb{E}[\nabla\log\pi_\theta\,\hat A]$: **the policy gradient**. On the chain both
sides are exact: $J$ is the linear solve (differentiable, so autograd gives $\nabla J$), and the expectation
weights each state by its discounted visitation $d_{\text{old}}(s) = \sum_t\gamma^t P(s_t = s)$, with the exact
$A_{\text{old}}$:

$$\tilde J(\theta) = \sum_s d_{\text{old}}(s)\sum_a \pi_{\text{old}}(a\mid s)\,\rho(\theta)\,A_{\text{old}}(s, a).$$

(PPO's batches weight states by how often they are visited, without the $\gamma^t$: a common approximation.)
Below, $\theta_{\text{old}}$ is a random table of logits.""",
    """p_zero = viz.Predict("What is the value J̃(θ_old) of the surrogate at θ = θ_old (a number)?", atol=1e-6)
p_zero.answer = None     # your prediction""",
    """theta_old = torch.randn(chain.n_states, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
grads = fd.surrogate_gradients(chain, theta_old)   # autograd of J and of J̃ at θ_old
print("∇J(θ_old) =", grads["grad_J"])
print("∇J̃(θ_old) =", grads["grad_L"])
print(f"largest difference: {grads['max_abs_diff']:.1e}")
p_zero.check(fd.surrogate(chain, theta_old, theta_old).item(),
             why="zero up to float rounding: ρ = 1 there, and E_π_old[A_old] = 0 (the section on A)")""",
    r"""md:Equal gradients say nothing about a step of finite size: $\tilde J$ uses $d_{\text{old}}$ and $A_{\text{old}}$, and
both go stale as $\pi_\theta$ moves. How fast depends on the parameters. With one logit per state, a step moves
each state's $\pi$ on its own; a network's weights move $\pi$ in many states at once. The extreme case is one
**shared logit**: $\pi_\theta(\text{right}\mid s) = \sigma(\theta)$ in every state. From $\theta_{\text{old}} = 0$, states
near the left end want more *right* and states near the right end want more *left*; the policy gradient weighs
them by $d_{\text{old}}$ and picks a direction. The widget steps $\theta = \theta_{\text{old}} + \alpha u$ along it ($u$ its
unit direction) and plots the true change $J(\theta) - J(\theta_{\text{old}})$, $\tilde J(\theta)$, and PPO's **clipped** surrogate,
where each term is $\min\big(\rho\hat A,\ \mathrm{clip}(\rho, 1-\varepsilon, 1+\varepsilon)\hat A\big)$.""",
    """p_far = viz.Predict("At a step α = 3, which of the two is above its value at θ_old: the surrogate J̃, the true J, both, or neither?",
                    choices=("both", "only the surrogate", "only J", "neither"))
p_far.answer = None      # your prediction""",
    r"""md:**Predict first.** (Answer `p_far` above.) Then move the step $\alpha$ and $\varepsilon$: where does each curve
peak?""",
    """fd.surrogate_view(step=0.5, clip_eps=0.2)""",
    """shared_old = torch.tensor(0.0, dtype=torch.float64)
far = fd.surrogate_drift(chain, shared_old, [3.0])
up_L, up_J = far["surrogate"][0] > 0, far["true_change"][0] > 0
p_far.check({(True, True): "both", (True, False): "only the surrogate", (False, True): "only J", (False, False): "neither"}[(up_L, up_J)],
            why=f"J̃(θ) = {far['surrogate'][0]:+.3f}, J(θ) − J(θ_old) = {far['true_change'][0]:+.3f}")
steps = torch.linspace(0, 3, 61).tolist()
drift = fd.surrogate_drift(chain, shared_old, steps, clip_eps=0.2)
for name in ("true_change", "surrogate", "clipped"):
    best = int(drift[name].argmax())
    print(f"{name:<12} " + (f"peaks at α = {steps[best]:.2f}" if best < len(steps) - 1 else
                            f"still rising at the end of the grid, α = {steps[-1]:.2f}: no peak"))
table = fd.surrogate_drift(chain, fd.uniform(chain), [0.5, 2.0, 8.0])
print("one logit per state, from θ = 0: J(θ) − J(θ_old) at α = 0.5, 2, 8:", table["true_change"].round(3))""",
    r"""md:<details><summary>Answer</summary>

$\tilde J$ is linear in $\pi_\theta$ with weights fixed at $\pi_{\text{old}}$: it keeps rewarding the direction that was
right at $\theta_{\text{old}}$, long after the visitation and the advantages have changed under the moving
policy and the true $J$ has turned down. The clipped surrogate stops paying for a ratio past $1 + \varepsilon$
where $\hat A > 0$ (and below $1 - \varepsilon$ where $\hat A < 0$), but keeps charging for ratios that moved the wrong
way; its peak lands near $J$'s (printed above). With one logit per state the last line shows a case where even
long steps still improve $J$ — how far a surrogate can be trusted depends on how the parameters share the policy.
</details>

So the surrogate is a **local** model of $J$: right to first order at $\theta_{\text{old}}$, drifting as $\pi_\theta$ moves.
TRPO maximises it inside a trust region, $\mathrm{KL}(\pi_{\text{old}}\,\|\,\pi_\theta) \le \kappa$ for a radius $\kappa$ it sets; PPO, more
cheaply, takes away with the clip what the surrogate would pay for ratios beyond $1 \pm \varepsilon$, and notebook 2 runs it for $\mu$ passes over each batch — the next
notebook.

## Self-check

Answer each question (a letter for a reason, one of the choices for a prediction), then run the cell after it.""",
    """q_ev = viz.Reason("A run's critic has an explained variance that climbs from 0.1 to 0.6, then drops to −0.5 after one update. What does the drop say?",
                   "nothing about the critic: explained variance is a noisy batch statistic, and one batch's −0.5 "
                   "is within its usual spread",
                   "the critic now predicts the returns worse than a constant would: Var[R − V̂] exceeds Var[R], so "
                   "that update broke it",
                   "the returns of that batch became more random: Var[R] grew faster than the critic could follow, "
                   "which pushes the score below 0")
q_ev.answer = None       # "a", "b" or "c\"""",
    """q_ev.check("b", why="below 0, Var[R − V̂] > Var[R]; more random returns lower it toward 0, as on the chain, not below")""",
    """p_n = viz.Predict("With the critic V̂ = 0.7 V (c = 0.3), by what factor does the squared error of the λ = 1 "
                  "estimate of V(s_start) shrink when the number of episodes n grows from 10 to 40 (a number)?")
p_n.answer = None        # your prediction""",
    """s = fd.estimator_stats(chain, 0.3, [0.0, 1.0])
squared_error = {n: s["bias"] ** 2 + s["var"] / n for n in (10, 40)}
shrink = squared_error[10] / squared_error[40]
p_n.check(shrink[1], why=f"λ = 1 never reads the critic: bias {s['bias'][1]:+.3f} (± {s['stderr'][1]:.3f}), so the error "
                         f"is the variance / n. At λ = 0 the critic's bias {s['bias'][0]:+.3f} stays: factor {shrink[0]:.2f}")""",
    """p_eps = viz.Predict("With ε = 0.5 instead of 0.2, does the clipped surrogate of the shared-logit policy peak at a "
                    "smaller step α than the true J does, or a larger one?", choices=("smaller", "larger"))
p_eps.answer = None      # your prediction""",
    """wide = fd.surrogate_drift(chain, shared_old, steps, clip_eps=0.5)
peak_clip, peak_J = steps[int(wide["clipped"].argmax())], steps[int(wide["true_change"].argmax())]
p_eps.check("smaller" if peak_clip < peak_J else "larger",
            why=f"α = {peak_clip:.2f} against {peak_J:.2f}: a wider clip trusts the surrogate further from θ_old")
viz.tally(p_adv, r_mean, p_lam, p_ev, r_clock, p_trunc, p_zero, p_far, q_ev, p_n, p_eps)""",
]
