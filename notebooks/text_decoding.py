# ruff: noqa: E501  (LaTeX lines in the notebook text are as long as their equations)
"""The text and code of notebook 5's section on decoding with a key/value cache (spliced in before the section
on the fourth policy, ``text_sampler.py``).

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

CELLS: list[str] = [
    r"""md:## Decoding with a key/value cache

Every language-model batch so far was drawn by a decode loop, ladder's own in the rungs (`policies.decode.decode`;
`--sampler-loop generate` swaps in transformers' `generate`); in Capstone II you will write your own `sample`
(`exercises/capstone2_grpo.py`): a loop over the model's forward that reuses the key/value cache. This section
takes that loop apart on the tiny Qwen2 of this notebook, and on notebook 4's tiny GPT-2.

Each attention layer turns column $j$ of the sequence into a query $q_j$, a key $k_j$ and a value $v_j$, and column $j$
attends to the keys and values of columns $0,\dots,j$ only. A column's keys and values therefore never change once
they are computed: nothing written after it reaches them. A decode loop keeps them, every layer's, in the **cache**:

* **prefill** — the prompts $[B, P]$ in one forward (`use_cache=True`); the last column's logits $z$ give each row's
  first new token, drawn from $\operatorname{softmax}(z/\tau)$;
* **decode** — step $t \ge 1$ feeds only the $B$ tokens drawn at step $t-1$, one column, with the cache; the forward
  appends that column's keys and values (the cache then holds $P + t$ columns) and returns the next logits.

**Left padding.** Prompts differ in length. Padded on the left, every prompt ends in column $P-1$, so every row's next
token is in the same, last column, and `logits[:, -1]` reads all rows at once. Two inputs of every forward then make
a padded row's numbers those of its prompt run alone, with no pads: the **attention mask**, one entry per column
of the sequence so far (1: a real token may attend to it, 0: not), and the **position ids**, the position the model
gives each column's token. The loops of this section are `viz.kv_cache.cached_decode` and `uncached_decode`. Three
prompts, left-padded, with the prefill's attention mask:""",
    """from ladder.viz import answers, kv_cache, kv_cache_views

qwen = kv_cache.tiny_lm("rotary")
prompt_ids, prompt_mask = kv_cache.left_padded(qwen, kv_cache.PROMPTS["rotary"])
print(f"{qwen.name}: prompts {kv_cache.PROMPTS['rotary']}, ids [B, P] = {list(prompt_ids.shape)}")
print("attention mask of the prefill:\\n", prompt_mask)""",
    r"""md:**Your turn.** Decode step $t = 2$ (the prefill was step 0) feeds each row the one token drawn at step 1,
with the cache; its forward takes the attention mask of all $P + 2$ columns so far and their position ids. Build both
so that each row's next-token log-probs are those of its prompt decoded alone, without pads: `mask_2` from
`prompt_mask` (which of the $P + 2$ columns may a real token attend to?), and the position ids with a function
`positions_from(mask)` of your own, written with torch operations on any left-padded mask (which position does a
row's first real token get, and each token after it?). The prefill's mask is printed above. The pads' position ids
are never read (the mask hides them), so the check compares the position ids only where the mask is 1, on step 2's
mask and on a second mask with other pads.""",
    """mask_2 = ...              # [B, P + 2]: the attention mask of step 2's forward, from prompt_mask


def positions_from(mask):  # [B, S] left-padded attention mask → [B, S] position ids, from mask's 0s and 1s
    return ...             # torch operations on mask (not policies.causal_lm.position_ids_for)""",
    """# the reference is in ladder/viz/answers.py: the answer and its code are printed once you have answered
answers.check_decode_step(mask_2, positions_from, prompt_mask)""",
    r"""md:The rule the check applied. The attention mask is 0 on the pads, so no real token attends to them; each forward
gets the mask of all the columns so far, and each decode step appends a column of ones: $[B, P + t]$ at step $t$.
The position ids number each row from its first real token,

$$\text{position\_ids} = \max\big(\operatorname{cumsum}(\text{mask}) - 1,\ 0\big)$$

(`policies.causal_lm.position_ids_for`; the pads get 0, and the mask hides them), and a row's new token at each step
is at the row's previous position $+ 1$.

By hand, with transformers ≥ 5.24, one prefill and one decode step read:

```python
out = model(input_ids=prompt_ids, attention_mask=mask, position_ids=positions, use_cache=True)   # prefill
token = torch.multinomial(torch.softmax(out.logits[:, -1] / tau, -1), 1, generator=generator)  # [B, 1]
mask = torch.cat([mask, torch.ones_like(token)], 1)                    # one more column of ones
out = model(input_ids=token, attention_mask=mask, position_ids=positions[:, -1:] + 1,
            cache=out.cache, use_cache=True)                           # one token, the cache from before
```

Before 5.24 the argument and the output were both called `past_key_values`; `ladder.patches.with_cache` and
`cache_of` pass and read the cache under the name the installed version uses.""",
    """why_positions = viz.Reason(
    "Drop position_ids from the forward: the model then numbers the columns 0, 1, 2, … pads included. Whose "
    "next-token log-probs for a left-padded row change: the tiny Qwen2's (rotary embeddings: each column's query and "
    "key are rotated by angles proportional to its position) or the tiny GPT-2's (a learnt vector for each position "
    "is added to the token's embedding)? Why?",
    "the rotary model's only: a rotation by m·ω is not a shift, so numbering the pads moves every angle of the row, "
    "where GPT-2's learnt position vectors are small next to its token embeddings and change little",
    "neither: the attention mask is 0 on the pads, so no real token reads a pad, and what a real token reads "
    "decides its log-probs; the numbers the pads would have taken never reach it",
    "GPT-2's only: a rotary attention score depends only on the difference of two positions, which shifting a whole "
    "row leaves as it was; GPT-2's input at every token changes with its position",
    "both: each row's positions shift by its number of pads, and each model's attention scores depend on the "
    "absolute position of the query and of the key, whatever way it encodes them")
why_positions.answer = None       # "a", "b", "c" or "d"
why_positions.ask()""",
    """forgot = {kind: kv_cache.forgotten_positions(kind) for kind in ("rotary", "absolute")}
for f in forgot.values():
    print(f"{f['name']}, pads per row {f['pads']}: largest |Δ log π| against each prompt run alone "
          f"{f['with']:.1e} with position ids, {f['without']:.1e} without")
changed = tuple(forgot[kind]["without"] > 1e-3 for kind in ("rotary", "absolute"))
key = {(True, False): "a", (False, False): "b", (False, True): "c", (True, True): "d"}[changed]
why_positions.check(key, why="from the numbers above: a difference below 1e-3 is float rounding, not a change")""",
    r"""md:Rotary embeddings rotate each pair of a query's (and a key's) dimensions by the angle $m\,\omega_i$ at position
$m$, one frequency $\omega_i$ per pair: $\tilde q_m = R(m\omega)\,q$, $\tilde k_n = R(n\omega)\,k$. Rotations compose and
transpose, $R(m\omega)^\top R(n\omega) = R((n-m)\omega)$, so the score

$$\tilde q_m^\top \tilde k_n = q^\top R\big((n-m)\,\omega\big)\,k$$

depends on the difference $n - m$ alone. Numbering a row by column shifts all its positions by the row's number of
pads: every difference stays, every score stays, and only the rounding of the sines and cosines of larger angles
moves the output. GPT-2 instead adds a learnt vector $W_{\text{pos}}[m]$ to the embedding of the token at position
$m$; shift the positions and every token's input is another vector. Position ids from the mask are right for both
models — and the forward that later scores the completions (`core.token_logp`, notebook 4) must number the
positions exactly as the sampler did.

### Cached against uncached

`cached_decode` and `uncached_decode` draw from $\operatorname{softmax}(z/\tau)$ with the same seed. The uncached loop
has no cache: its step $t$ reruns the whole sequence, $P + t$ columns, keeps the last column's logits and throws the
rest away. The widget follows the three prompts above through 10 steps: the mask of step $t$'s forward with each
column's position id, a frame round the columns the cached forward feeds, and the cache's length after it; on the
right, the tokens each loop has fed the model in steps $0,\dots,t$.""",
    r"""md:**Predict first.** Slide $t$ from 0 to 9. Over $T$ new tokens, how does the number of tokens each loop feeds the
model grow with $T$? On this tiny model, will the uncached loop's wall time exceed the cached loop's by as large a
factor as its token count does, and why? With the same seed, will the two loops' log-probs be equal bit for bit, or
only to float rounding — and will they draw the same tokens?""",
    """view = kv_cache_views.decode_view(steps=10)
view""",
    """loops = kv_cache.both_loops(rows=8, steps=48)
fed = kv_cache.tokens_fed(loops["rows"], loops["prompt_len"], loops["steps"])
print(f"{loops['rows']} prompts, T = {loops['steps']} new tokens, one seed: the same tokens {loops['same_tokens']}; "
      f"largest |log π cached − log π uncached| {loops['max_logp_diff']:.1e}")
print(f"tokens fed: cached {int(fed['cached'].sum())}, uncached {int(fed['uncached'].sum())} "
      f"({fed['uncached'].sum() / fed['cached'].sum():.1f}×)")
print(f"wall time on this machine: cached {loops['cached_seconds']:.3f} s, uncached {loops['uncached_seconds']:.3f} s "
      f"({loops['uncached_seconds'] / loops['cached_seconds']:.1f}×)")
display(Image(data=kv_cache_views.step_times_figure(loops)))""",
    r"""md:<details><summary>Answer</summary>

The cache changes nothing but the time. The cached loop feeds $B\cdot P$ tokens at the prefill and $B$ at every step after it: its work grows with $T$. The
uncached loop feeds $B\,(P + t)$ at step $t$, in all $B\,\big(TP + T(T-1)/2\big)$: its work grows with the square of
$T$. (A cached step still attends to $P + t$ keys, a cost that grows with $t$ too, but it is one column's attention,
not a whole forward.) The two draw the same tokens: the cache holds exactly the keys and values the uncached
forward recomputes for the earlier columns — a causal layer's column never depends on later ones — so the last
column's logits are the same numbers up to float rounding (the sums run in another order; the first line prints the
largest difference), and one seed draws the same tokens from them. The printout compares the tokens fed with the
wall time this machine measured: on a model this small each forward's fixed cost (Python, starting every layer)
is a large share of a step, a cost the token count leaves out — the larger the model and the longer the
completions, the more the square of $T$ dominates. The plot shows each step's time as this machine measured it,
against what the token counts say: the uncached loop's steps growing with $t$, the cached loop's about flat.
</details>

Capstone II's `sample` is the cached loop, plus what this section left out: each row stops at its EOS (after it, the
mask of the loss and the log-probs are 0), and the grader checks that each step feeds one token. The rungs' loop
(`policies.decode`) does the same and one thing more for speed: a row that has drawn its EOS leaves the batch,
its rows of the cache dropped (`cache.batch_select_indices`), so the steps after it run on fewer rows.""",
]
