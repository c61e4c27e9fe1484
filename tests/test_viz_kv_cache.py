"""The decode loops of notebook 5's key/value-cache section, on the tiny models ladder ships: the cache changes
nothing but speed, left padding with position ids changes nothing at all, and the view draws what it says."""

import torch

from ladder.policies.causal_lm import position_ids_for
from ladder.viz import kv_cache, kv_cache_views


def test_the_cached_loop_draws_what_the_uncached_one_draws():
    lm = kv_cache.tiny_lm("rotary")
    ids, mask = kv_cache.left_padded(lm, kv_cache.PROMPTS["rotary"])
    cached = kv_cache.cached_decode(lm.model, ids, mask, steps=6, seed=3)
    uncached = kv_cache.uncached_decode(lm.model, ids, mask, steps=6, seed=3)
    assert torch.equal(cached.tokens, uncached.tokens)
    assert torch.allclose(cached.logp, uncached.logp, atol=1e-4)
    assert cached.tokens.shape == (3, 6) and len(cached.step_seconds) == 6


def test_a_row_decodes_the_same_padded_or_alone():
    lm = kv_cache.tiny_lm("absolute")
    ids, mask = kv_cache.left_padded(lm, kv_cache.PROMPTS["absolute"])
    padded = kv_cache.cached_decode(lm.model, ids, mask, steps=4, temperature=0.01)
    row = int((mask == 0).sum(1).argmax())   # the most padded row
    alone_ids, alone_mask = kv_cache.left_padded(lm, (kv_cache.PROMPTS["absolute"][row],))
    alone = kv_cache.cached_decode(lm.model, alone_ids, alone_mask, steps=4, temperature=0.01)
    assert torch.equal(padded.tokens[row], alone.tokens[0])
    assert torch.allclose(padded.logp[row], alone.logp[0], atol=1e-4)


def test_forgetting_position_ids_changes_gpt2_and_not_the_rotary_model():
    rotary, absolute = kv_cache.forgotten_positions("rotary"), kv_cache.forgotten_positions("absolute")
    assert max(rotary["pads"]) > 0 and max(absolute["pads"]) > 0
    assert rotary["with"] < 1e-4 and rotary["without"] < 1e-3
    assert absolute["with"] < 1e-4 and absolute["without"] > 0.1


def test_the_mask_grows_by_a_column_of_ones_and_positions_skip_the_pads():
    mask = torch.tensor([[0, 0, 1], [1, 1, 1]])
    grown = kv_cache.grown_mask(mask, 2)
    assert grown.tolist() == [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]
    assert position_ids_for(grown).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]


def test_tokens_fed_by_each_loop():
    fed = kv_cache.tokens_fed(batch=3, prompt_len=5, steps=4)
    assert fed["cached"].tolist() == [15, 3, 3, 3]
    assert fed["uncached"].tolist() == [15, 18, 21, 24]
    assert int(fed["uncached"].sum()) == 3 * (4 * 5 + 4 * 3 // 2)


def test_the_view_shows_step_t():
    view = kv_cache_views.decode_view(step=0, steps=5)
    view.controls["step"].value = 3
    _, prompt_mask = kv_cache.left_padded(kv_cache.tiny_lm("rotary"), kv_cache.PROMPTS["rotary"])
    prompt_len = prompt_mask.shape[1]
    assert view.data["mask"].shape == (3, prompt_len + 3) and view.data["cache_len"] == prompt_len + 3
    assert view.data["positions"][:, -1].tolist() == (prompt_mask.sum(1) + 2).tolist()
    assert view.data["fed_cached"] == 3 and view.data["fed_uncached"] == 3 * (prompt_len + 3)
    assert bytes(view.image.value).startswith(b"\x89PNG")
