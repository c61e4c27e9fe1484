# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 7: agents, when the environment talks back.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

from text_toy import SELF_CHECK, SETUP

NOTEBOOKS: dict[str, list[str]] = {}

NOTEBOOKS["7_agents"] = [
    r"""md:# 7 · Agents: when the environment talks back

After this notebook (about an hour, on a CPU) you will be able to:

* read an agent's trajectory as one $[B, T]$ row with two masks, and say which of its tokens get gradient;
* say what goes wrong when the environment's tokens are trained on, and measure it;
* compute per-turn credit (DeepSeekMath's process supervision) and tell it from per-trajectory credit.

Until now a completion was the model's alone: every token after the prompt was an action. An **agent** writes a
turn — here a tool call — and the **environment** answers; the model reads the answer and goes on. The agent rung
(`python -m ladder.run agent`) is GRPO on such trajectories, and the whole difference to notebook 5 is in the
rollout and in one mask: the same `grpo.grpo_step`, the same `core.update`, the same loss.

Two tiny environments ship with the package, each with a tiny tool-calling model ladder built for it:

* `--preset tiny` — the **calculator**: "What is 37 * 48?" with a `multiply` tool. The tiny model cannot multiply; the tool can.
* `--preset tiny-guess` — the **guessing game**: a secret number from 1 to 10, found with at most five calls of a `guess` tool (`--max-tool-calls 5`), which replies how the secret compares with the guess and which numbers are still possible ("higher: 6 to 10": the secret is above the guess, somewhere in 6–10), then a last turn `#### n`. The game is won by the guess that gets "correct" (its own reward, `get_reward`); the answer line is not graded. The reply restates the whole range left, so a good next guess needs no memory of earlier turns, only a number from the latest reply; the game's tiny model ignores the replies on half its guesses, and RL has that to unlearn.""",
    SETUP,
    r"""md:## 1 · One trajectory, two masks

A calculator trajectory, as the model reads it: the prompt, then **the model's turn** (a `<tool_call>` with JSON
arguments, ended by `<|im_end|>`), then **the environment's tokens** (the chat template's markers, the tool's reply
inside `<tool_response>`, and the header of the next assistant turn), then the model's answer `#### …`. All of it
is one row of token ids $x_{1..T}$ after the prompt, with two masks:

$$m_t = \begin{cases}1 & x_t \text{ written by the model (an action)}\\ 0 & x_t \text{ the environment's, or pad}\end{cases}
\qquad \alpha_t = \begin{cases}1 & x_t \text{ read by the model (the model's or the environment's)}\\ 0 & \text{pad}\end{cases}$$

The attention mask $\alpha$ (`attention_mask`) goes into the forward pass. The loss
mask $m$ goes into the loss — the same as notebook 5's, with $m$ in place of "every completion token":

$$L = \operatorname{agg}_{t:\,m_t = 1}\Big(-\min\big(\rho_t(\theta)\hat A_t,\ \operatorname{clip}(\rho_t(\theta), 1-\varepsilon, 1+\varepsilon)\,\hat A_t\big) + \beta\, \rho_t(\theta)\,k_3\Big), \qquad \hat A_t = \hat A_i\, m_t ,$$

with $\rho_t(\theta) = \pi_\theta(x_t)/\pi_{\text{old}}(x_t)$ the ratio, as in notebooks 2–6.

An environment token has no log-prob term, no KL term, no entropy and no advantage: the model did not choose it.
`agent_rollout.trajectory_tensors` builds the row from a list of turns (*segments*); here two hand-made
trajectories, one with a tool call and one that answers at once.""",
    """p_env = viz.Predict("The next cell builds two hand-made trajectories from their turns — the first: a model turn of 3 "
                    "tokens, an environment reply of 2, a model turn of 2; the second: a model turn of 2 — padded at "
                    "the end into one [2, T] block. Over both rows, how many positions will have attention 1 but mask 0?")
p_env.answer = None      # your prediction (a number), before you run on""",
    """from ladder.rungs import agent, grpo
from ladder.rungs.agent import rollout as agent_rollout
from ladder.viz import agent_lab, agent_views

hand_made = [[("model", [11, 12, 13]), ("env", [21, 22]), ("model", [14, 15])],   # call, reply, answer
             [("model", [16, 17])]]                                                # an answer at once
completion, mask, attention = agent_rollout.trajectory_tensors(hand_made, pad_token_id=0)
print("completion    ", completion.tolist())
print("mask          ", mask.long().tolist())
print("attention_mask", attention.long().tolist())
print("turn          ", agent_rollout.turn_index(mask).tolist(), "  (the model turn of each token; −1: not the model's)")
p_env.check(int(((attention == 1) & (mask == 0)).sum()),
            why="read but not trained on: the environment's 2 tokens; the second row's pads have attention 0 too")""",
    r"""md:Now a real one. The cell below runs **the first half of one update of the agent rung** on the tiny calculator
preset (here 4 problems × $G = 8$ trajectories; the preset itself draws 8 problems per update): `grpo.grpo_batch`,
which samples, scores and builds the batch that `core.update` receives — the rung's `grpo.grpo_step` is `grpo_batch`
followed by `core.update`. The widget shows one group: each token on blue (the model's) or sand (the
environment's) with its $\hat A$ under it, and the group's `mask`, `attention_mask` and $\hat A\cdot m$ as $[G, T]$ maps.""",
    """view = agent_views.trajectory_view(row=0)
view""",
    """first = agent_lab.calculator_update()           # cached: the widget above computed it
group, batch = first["group"], first["batch"]
env_tokens = first["rollout_attention"] - first["rollout_mask"]   # attention 1, mask 0
T = batch.mask.shape[1]
print(f"batch.inputs['input_ids'] {list(batch.inputs['input_ids'].shape)} = [B, prompt + T];  "
      f"batch.mask {list(batch.mask.shape)} = [B, T];  batch.advantages {list(batch.advantages.shape)}")
print(f"the forward pass reads the environment's tokens: "
      f"{bool((batch.inputs['attention_mask'][:, -T:] == first['rollout_attention']).all())}")
print(f"{int(env_tokens.sum())} environment tokens in the batch; with mask 1: {int((batch.mask * env_tokens).sum())}, "
      f"with Â ≠ 0: {int(((batch.advantages != 0) & env_tokens.bool()).sum())}")
print()
row = view.data["row"]
for s in agent_lab.segments(group, row):
    print(f"{s['kind']:11s} {s['tokens']:3d} tokens  mask {s['mask']}  attention {s['attention']}  Â {s['advantage']:+.3f}  {s['text']!r}")""",
    r"""md:Move the slider: every trajectory of the group is one row of the same $[G, T]$ block, padded at the end; the
sand runs have mask 0 whatever the trajectory's reward, and the model's tokens all carry their trajectory's
$\hat A_i$ (GRPO's credit, `--credit trajectory`). Nothing in `core.update` knows about tools: it gets a `Batch` with
`mask` and `advantages` as always (the lines above print its shapes), and the attention mask rides in `batch.inputs`.

**Exercise:** `ex22_trajectory_tensors.py` — the two masks from a list of turns (`pytest exercises/`; then
`python -m ladder.run agent --preset tiny --use-exercises` trains with yours).""",
    r"""md:## 2 · The rollout: turn after turn, on one cache

`agent_rollout.multi_turn` samples all $B$ trajectories together. The prompts are encoded once; then each step draws
one token for every row still going (mask 1) and feeds, in one forward on the cache, what each row adds: its token,
and where that token ended a turn of calls, the environment's whole reply with it (mask 0, attention 1). When the
model ends a turn with `<|im_end|>` its text is parsed for `<tool_call>` JSON (`tool_calls.parse_tool_calls`); each
call runs against that row's environment (past `--max-tool-calls`, each is answered with an error instead), and the
chat template's rendering of the reply (`tool_calls.suffix_ids`) is what the row feeds next, unless it leaves no room
in the budget for a token of answer: then the reply is dropped and the trajectory ends, truncated. The rows' feeds differ in length, so each is left-padded to the longest (pad: attention 0),
which puts every row's last token at the end, where the next draw's logits are. A turn without a call is the answer
and ends the trajectory, and an ended row leaves the batch (its rows of the cache dropped). Every token — the
model's or the environment's — goes through the model at most once (the one that ends a trajectory is never fed), on
the same key/value cache: nothing is re-encoded when a new turn begins, and a reply of 15 tokens rides in the
forward that feeds its EOS: no forward of its own, not 15. Two limits: `--max-tool-calls` (turns that call
tools; TRL's `max_tool_calling_iterations`) and `--max-new-tokens`, the budget of the *whole* trajectory, the
environment's tokens included (TRL's `max_completion_length`). The batch's statistics (the keys a run writes to
`metrics.jsonl` for this update) count what happened:""",
    """record = first["record"]
for key in ("agent/turns", "agent/tool_calls", "agent/tool_failures", "agent/env_tokens", "completions/mean_length"):
    print(f"{key:26s} {record[key]:.2f}   (mean per trajectory)")
print(f"this group: tool calls {group.tool_calls.tolist()}, rewards {group.rewards.tolist()}")""",
    r"""md:The tiny model was built to call the tool on some samples and to write a number of its own on the others (this
group's calls and rewards are printed above); section 3 prints its greedy held-out accuracy before any update. The
correctness reward pays the trajectories that called the tool and copied its reply, so in a group with both kinds
their $\hat A_i > 0$, and training should raise the share of calls and the accuracy: `python -m ladder.run agent
--preset tiny` (40 updates) prints the accuracy before and after in its summary, and its `curves.png` and
`metrics.jsonl` hold the calls per trajectory, `agent/tool_calls`.

**Exercise:** `ex23_multi_turn.py` — the rollout itself: one cache, a reply fed whole, ended rows out, the budget
(`python -m ladder.run agent --preset tiny --use-exercises` samples with yours).""",
    r"""md:## 3 · The environment's tokens in the loss

`--train-env-tokens` makes the mistake on purpose: the loss mask becomes the attention mask, so the tool's reply is
trained on *as if the model had written it*: its tokens get the trajectory's $\hat A_i$ and a KL term, like the
model's own.

Two runs of the tiny calculator preset from the same seed (so the same first batch), 24 updates each, the default and
`--train-env-tokens`. After every update a fixed **probe** — 32 held-out products, each with the right `multiply`
call and the tool's right reply — measures

$$\overline{\log\pi}_{\text{digits}} = \frac{1}{|D|}\sum_{t \in D}\log\pi_\theta(x_t \mid x_{<t}), \qquad D = \text{the positions of the reply's digits,}$$

and the exact $\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$ (a sum over the whole vocabulary) at the call's positions and at the
reply's. Greedy held-out accuracy is measured every 8 updates on 50 products. The two runs are the notebook's
longest computation (the widget runs them once; the cell after it reads the same runs).""",
    """p_digits = viz.Predict("After 24 updates with --train-env-tokens, will log π of the reply's digits (the probe) "
                       "be higher or lower than after 24 updates of the default run?", choices=("higher", "lower"))
p_digits.answer = None""",
    """view = agent_views.env_tokens_view()
view""",
    """runs = agent_lab.env_token_runs(steps=24)
for name, run in runs.items():
    before, after = run["rows"][0], run["rows"][-1]
    print(f"{name}:\\n   log π(reply digits) {before['logp_digits']:+.2f} → {after['logp_digits']:+.2f}   "
          f"exact KL at the reply {before['kl_env']:.3f} → {after['kl_env']:.3f}, at the call "
          f"{before['kl_model']:.3f} → {after['kl_model']:.3f}\\n   held-out accuracy "
          f"{before['eval_accuracy']:.2f} → {after['eval_accuracy']:.2f}   the rung's kl_ref {after['kl_ref']:.3f}")
default, mistaken = runs["default"]["rows"][-1], runs["--train-env-tokens"]["rows"][-1]
p_digits.check("higher" if mistaken["logp_digits"] > default["logp_digits"] else "lower",
               why=f"{mistaken['logp_digits']:+.2f} against {default['logp_digits']:+.2f}: the reply's digits were "
                   "in the loss with the Â of trajectories whose call paid off")
print(f"π_θ moved further from π_ref at the reply's positions with --train-env-tokens: "
      f"{mistaken['kl_env'] > default['kl_env']} ({mistaken['kl_env']:.3f} against {default['kl_env']:.3f})")
print(f"held-out accuracy after {runs['default']['steps']} updates: default {default['eval_accuracy']:.2f}, "
      f"--train-env-tokens {mistaken['eval_accuracy']:.2f} (on {runs['default']['eval_size']} products)")""",
    r"""md:Where a call paid off ($\hat A_i > 0$), the loss raises $\log\pi_\theta$ of the reply's digits: the model is taught
to produce the tool's answer itself, the very thing it cannot do (and the reason for the tool). Their KL term pulls
the other way, now on tokens the model never chose.

Read the printout. The probe's reply digits are what the mistake trains; the line after the check says whether
π_θ also moved further from π_ref at the reply's positions. The rung's own `kl_ref` is not comparable between the
runs: it averages over each run's loss tokens, and those are different tokens (the mistaken run's include the
replies); the probe's KLs are on the same positions in both. The last line is this run's held-out accuracy: at 24
updates on 50 products the two may well be close, and one seed does not rank them — what the mistake surely does is
spend gradient on teaching the model to guess products, which is the tool's job, and move the model where nothing
was asked of it.""",
    """why_drift = viz.Reason("In the default run no reply token is in the loss. Why can the exact KL at the reply's "
                       "positions change at all?",
                       "the reply's tokens are in the forward pass (attention 1), and every token the forward reads "
                       "is differentiated through, so the replies' log-probs receive gradient through attention",
                       "the KL term is averaged over every position the forward reads, the replies' included, so it "
                       "moves them towards π_ref while the policy term moves the model's tokens",
                       "the weights are shared: training the model's own tokens changes its predictions everywhere, and "
                       "no KL term holds the reply's positions (their mask is 0)",
                       "the probe's replies are sampled afresh at each measurement, so the positions it measures hold "
                       "other tokens, and their KL changes even where the model has not")
why_drift.answer = None""",
    """kl_before = runs["default"]["rows"][0]["kl_env"]
moved = "grew" if default["kl_env"] > kl_before else "did not grow"
print(f"default run, exact KL at the reply's positions: {kl_before:.3f} → {default['kl_env']:.3f} ({moved}); "
      f"the KL term's positions are the mask's: {int(first['rollout_mask'].sum())} model tokens in section 1's batch, "
      "none of them the environment's")
why_drift.check("c", why="a token's KL term sits where mask = 1; the replies' positions drift with the shared weights, "
                        "harmlessly, since nothing samples there: the environment writes those tokens")""",
    r"""md:## 4 · Per-trajectory vs per-turn credit

In the guessing game a trajectory has several turns, and they are not equally good: a guess the earlier replies had
already ruled out is a wasted turn, even in a game that is eventually won. GRPO's credit (`--credit trajectory`)
gives every model token of trajectory $i$ the same $\hat A_i$. DeepSeekMath's **process supervision** instead
rewards each reasoning step; here a step is a turn. The environment gives each guess a reward (its `turn_rewards`
list; the game's docstring, printed below, says what a guess earns). The last turn, the answer `#### n`, is a turn
too: the environment gives it nothing, and the trajectory's own reward (1 if the secret was found) is added to it.
`core.group_relative_turns` (`--credit turn`) normalises all the rewards of the group's turns together and gives each
turn the sum of what follows:

$$\tilde r_{i,k} = \frac{r_{i,k} - \operatorname{mean}(\mathbf R_{\text{group}})}{\operatorname{std}(\mathbf R_{\text{group}}) + \epsilon}, \qquad \hat A_{i,k} = \sum_{j \ge k} \tilde r_{i,j},$$

with $\mathbf R_{\text{group}}$ every turn reward of the group's $G$ trajectories — the turns each trajectory really has, not
the padding past its last — and std the sample standard deviation (divided by $n-1$, as GRPO's); every token of turn
$k$ gets $\hat A_{i,k}$.
Below, one group of the tiny guessing game (sampled by its tiny model before any training) with both credits
computed from the same rollout.""",
    """import inspect

from ladder.tasks import agent_envs

print(inspect.getdoc(agent_envs.GuessingGame))
game = agent_lab.guess_group()
print(f"{game.question!r}: rewards {game.rewards.tolist()}")
print("per-turn rewards r_{i,k}, a row per trajectory (the trajectory's reward added to its last turn, the answer):")
for i in range(len(game.rewards)):
    turns = int(game.turn[i].max()) + 1
    guesses = f"{turns - 1} guess" + ("es" if turns != 2 else "")
    print(f"  trajectory {i}: {turns} turns ({guesses} + the answer), r = {game.turn_rewards[i, :turns].tolist()}")""",
    """p_distinct = viz.Predict("From trajectory 0's per-turn rewards printed above (and the group's): how many distinct "
                         "values of Â will its model tokens (all its turns) carry under --credit turn?")
p_distinct.answer = None""",
    """view = agent_views.credit_view(row=0, credit="turn")
view""",
    """on_model = game.mask[0].bool()
p_distinct.check(len({round(a, 5) for a in game.advantages["turn"][0][on_model].tolist()}),
                 why=f"--credit turn: every token of turn k gets Â_(0,k) = Σ_(j ≥ k) r̃_(0,j); trajectory 0 has "
                     f"{int(game.turn[0].max()) + 1} turn(s), and two turns share a value only where a r̃ between them is 0")
present = torch.arange(game.turn_rewards.shape[1])[None, :] <= game.turn.max(1).values[:, None]
per_turn = core.group_relative_turns(game.turn_rewards, present, len(game.rewards))
for i in range(len(game.rewards)):
    turns = agent_lab.turn_table(game, i)
    print(f"trajectory {i} (reward {game.rewards[i]:g}): Â per turn, trajectory credit "
          + " ".join(f"{t['trajectory'] + 0:+.2f}" for t in turns) + "  |  turn credit "
          + " ".join(f"{round(t['turn'], 2) + 0:+.2f}" for t in turns))
print("core.group_relative_turns gives the same per-turn Â as the rung's turn_credit:",
      all(abs(t["turn"] - per_turn[i, t["index"]].item()) < 1e-5
          for i in range(len(game.rewards)) for t in agent_lab.turn_table(game, i)))""",
    r"""md:Slide through the group with `--credit turn` on: inside one trajectory the advantage now changes from turn to turn.
Switch to `trajectory`: each row is one colour again. The normalisation runs over *all* the group's turns, so a turn
whose own reward is 0 gets a negative $\tilde r$ — the per-turn rewards decide the scale. Under per-turn credit a turn
of a lost game *can* carry $\hat A > 0$ (good guesses, then bad luck) and a turn of a won game $\hat A < 0$ (a wasted
guess before the win); the cell below counts whether this group has any. And since each kept guess earns a reward, a
slow win collects more than a fast one: process rewards can pay for length, which the trajectory's credit never
does — a reason per-turn rewards are designed with care.""",
    """lost_up = sum(t["turn"] > 0.005 for i in range(len(game.rewards)) if game.rewards[i] < 1
              for t in agent_lab.turn_table(game, i))
won_down = sum(t["turn"] < -0.005 for i in range(len(game.rewards)) if game.rewards[i] >= 1
               for t in agent_lab.turn_table(game, i))
print(f"turns of lost games with Â > 0: {lost_up}; turns of won games with Â < 0: {won_down}")""",
    """why_sum = viz.Reason("Why is a turn's advantage Σ_{j ≥ k} r̃_{i,j}, the normalised rewards from turn k on, and not "
                      "turn k's own r̃_{i,k} alone?",
                      "the sum makes the turn advantages of a trajectory add up to its GRPO advantage Â_i, so that "
                      "per-turn credit only redistributes what --credit trajectory would give",
                      "turn k's own r̃_{i,k} is noisy, and summing the later ones averages that noise out, the way "
                      "GAE's λ trades variance for bias",
                      "the normalisation makes each r̃ zero-mean over the group, so a single turn's r̃ alone would "
                      "carry no signal; only the sums over several turns do",
                      "turn k's choice shapes what follows (the reply it gets, the later guesses), so its credit "
                      "includes the rewards after it: a return-to-go, as in notebook 1")
why_sum.answer = None""",
    """i = max(range(len(game.rewards)), key=lambda i: int(present[i].sum()))
normalised = per_turn[i] - torch.cat([per_turn[i, 1:], torch.zeros(1)])    # r̃_{i,k} = Â_{i,k} − Â_{i,k+1}
print(f"trajectory {i}: r̃ per turn {[round(x, 2) for x in normalised[present[i]].tolist()]}, "
      f"Â per turn {[round(x, 2) for x in per_turn[i][present[i]].tolist()]}")
why_sum.check("d", why="Â_{i,k} = r̃_{i,k} + Â_{i,k+1}: each turn inherits the credit of the turns it led to")""",
    r"""md:## 5 · The environment protocol, and where each idea lives

An environment is a class in TRL 1.16's protocol (`ladder.tasks.tool_calls`), so one class works in both:
the trainer makes one instance per trajectory and calls `env.reset(**problem)` before it; every other public method
is a **tool** — its signature and docstring (`Args:`) are the schema the chat template shows the model; an optional
`get_reward()` scores the trajectory. ladder reads one more attribute, `turn_rewards` (section 4). `--env` takes a
built-in name or your own `FILE.py:Class`; `python -m ladder.run agent --preset tiny --export-trl run.py` writes the
same run as a TRL script with `GRPOTrainer(environment_factory=…)`.

| idea | ladder | flag | TRL 1.16 |
|---|---|---|---|
| the environment: reset, tools, reward | `agent.environment`, `tool_calls.tools_of` | `agent --env` | `GRPOTrainer(environment_factory=…)` |
| two masks: trained on vs read | `agent_rollout.trajectory_tensors`, `Trajectories.mask` / `.attention_mask` | `agent --train-env-tokens` (the mistake) | `tool_mask` (always on: no switch) |
| the multi-turn rollout on one cache | `agent_rollout.multi_turn` | `agent --max-tool-calls`, `--max-new-tokens` | `max_tool_calling_iterations`, `max_completion_length` |
| per-turn credit | `core.group_relative_turns`, `agent.turn_credit` | `agent --credit turn` | — (TRL gives the trajectory's Â) |
| the update | `grpo.grpo_step` (`grpo_batch` → `core.update`) | every `grpo` option | `GRPOTrainer` |

The full map of TRL's names is notebook 6 §5 (`viz.trl_map_markdown()`, from `ladder.trl.map`); its agent rows say where TRL and ladder differ (TRL ends a trajectory at
a call past its limit; ladder answers it with an error the model reads).

**Exercises:** `ex22_trajectory_tensors.py` (two masks from a list of turns, section 1) and `ex23_multi_turn.py`
(the rollout, section 2); `pytest exercises/` grades them, and
`python -m ladder.run agent --preset tiny --use-exercises` trains with yours.""",
    SELF_CHECK,
    """p_rows = viz.Predict("Section 1's hand-made trajectories: give the second one a tool call too, so it is a model "
                     "segment of 2 tokens, an environment segment of 3 and a model segment of 1. How many of its tokens "
                     "will have mask 1?")
p_rows.answer = None
p_loss = viz.Predict("Section 1's batch under --train-env-tokens: how many tokens of it would be in the loss (mask 1)?")
p_loss.answer = None
p_zero = viz.Predict("Section 4's group with the game's own per-turn rewards set to 0 (only the trajectory's reward, on "
                     "its last turn): under --credit turn, will trajectory 0's first turn and its last turn still get "
                     "different Â?", choices=("yes", "no"))
p_zero.answer = None
why_attend = viz.Reason("Why must the environment's tokens keep attention 1 though they get no gradient?",
                        "the KL term of the next turn compares π_θ with π_ref on the same context, and with attention 0 "
                        "the reference forward would see the reply while the trained one would not",
                        "the model's next turn must read the tool's reply: with attention 0 its answer could not use "
                        "the result, and the turn would be written as if no tool had answered",
                        "with attention 0 the reply's tokens would drop out of the key/value cache, and the next turn "
                        "would have to re-encode the whole trajectory from the prompt",
                        "the KL term needs π_θ's log-prob at every token the forward reads, and a token with attention "
                        "0 would get none, leaving the KL of the next turn undefined")
why_attend.answer = None
for question in (p_rows, p_loss, p_zero, why_attend):
    question.ask()
    print()""",
    """_, mask_two, _ = agent_rollout.trajectory_tensors(
    [hand_made[0], [("model", [16, 17]), ("env", [21, 22, 23]), ("model", [18])]], pad_token_id=0)
p_rows.check(int(mask_two[1].sum()), why="only the model's segments: 2 + 1; the environment's 3 are read, not trained on")
p_loss.check(int(first["rollout_attention"].sum()),
             why=f"mask = attention: {int(first['rollout_mask'].sum())} model tokens + {int(env_tokens.sum())} "
                 "environment tokens")
only_last = torch.zeros_like(game.turn_rewards)
last = game.turn.max(1).values
only_last[torch.arange(len(last)), last] = game.rewards
zeroed = core.group_relative_turns(only_last, present, len(game.rewards))
k0 = int(last[0])
p_zero.check("yes" if abs(zeroed[0, 0] - zeroed[0, k0]) > 1e-6 else "no",
             why=f"Â first {zeroed[0, 0]:+.3f}, last {zeroed[0, k0]:+.3f}: a 0 turn reward still normalises to "
                 "(0 − mean)/std, which is not 0 when the group's mean is not 0, and the sum from turn k on counts it "
                 f"(trajectory 0 has {k0 + 1} turn(s); with one turn first and last are the same)")
why_attend.check("b", why="attention decides what the forward pass reads; the mask decides what the loss grades")
viz.tally(p_rows, p_loss, p_zero, why_attend)""",
]
