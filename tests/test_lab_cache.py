"""A lab's result kept on disk: made once, read back equal, made again when its file is damaged."""

from ladder.viz import lab_cache

CALLS = []


@lab_cache.on_disk
def squares(n: int, offset: int = 0) -> list[int]:
    CALLS.append(n)
    return [i * i + offset for i in range(n)]


def test_made_once_read_back_and_made_again_when_damaged(monkeypatch, tmp_path):
    monkeypatch.setenv("LADDER_CACHE", str(tmp_path))
    CALLS.clear()
    assert squares(4) == [0, 1, 4, 9]
    assert squares(4, offset=0) == [0, 1, 4, 9] and CALLS == [4]   # the same call, defaults filled in: read back
    assert squares(3) == [0, 1, 4] and CALLS == [4, 3]
    for path in (tmp_path / "labs").glob("squares-*.pt"):
        path.write_bytes(b"torn")                                     # a damaged file: made again, kept again
    assert squares(4) == [0, 1, 4, 9] and CALLS == [4, 3, 4]
    assert squares(4) == [0, 1, 4, 9] and CALLS == [4, 3, 4]
