"""Tables kept between processes (``neardup.tablecache``): the text normalisation's, read back as computed."""

from __future__ import annotations

import numpy as np
import pytest

from neardup import tablecache, text


def _arrays():
    return {"words": np.packbits(np.arange(64) % 3 == 0), "needs_python": np.array("[abc]")}


def _ok(t):
    return set(t) == {"words", "needs_python"} and t["words"].shape == (8,)


def test_a_table_is_computed_once_then_read_from_its_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tablecache, "FOLDER", tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return _arrays()

    first = tablecache.cached("t", compute, _ok)
    again = tablecache.cached("t", compute, _ok)
    assert len(calls) == 1
    assert tablecache.path_for("t").parent == tmp_path
    for k, v in _arrays().items():
        assert np.array_equal(first[k], v) and np.array_equal(again[k], v)


@pytest.mark.parametrize("damage", [b"", b"not a zip file", "cut", "other"])
def test_a_damaged_or_foreign_file_is_computed_again_and_rewritten(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(tablecache, "FOLDER", tmp_path)
    tablecache.cached("t", _arrays, _ok)
    path = tablecache.path_for("t")
    if damage == "cut":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "other":  # a valid file the check refuses
        with open(path, "wb") as fh:
            np.savez(fh, words=np.zeros(3, np.uint8))
    else:
        path.write_bytes(damage)
    calls = []
    got = tablecache.cached("t", lambda: calls.append(1) or _arrays(), _ok)
    assert calls == [1] and np.array_equal(got["words"], _arrays()["words"])
    assert _ok(tablecache.cached("t", lambda: pytest.fail("read from the rewritten file"), _ok))


def test_a_folder_that_cannot_be_written_computes_in_each_process(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    monkeypatch.setattr(tablecache, "FOLDER", blocker / "cache")  # under a file: no folder can be made
    calls = []
    for _ in range(2):
        assert _ok(tablecache.cached("t", lambda: calls.append(1) or _arrays(), _ok))
    assert calls == [1, 1]


def test_the_text_tables_from_the_file_are_those_computed(tmp_path, monkeypatch):
    """The word table and the careful table, read back from a fresh file, equal the ones the
    Unicode database and Arrow give."""
    monkeypatch.setattr(tablecache, "FOLDER", tmp_path)
    text._tables.cache_clear()
    try:
        written = text._tables()
        text._tables.cache_clear()
        read = text._tables()  # from the file just written
        assert tablecache.path_for("text").exists()
        for t in (written, read):
            assert np.array_equal(np.unpackbits(t["words"]).view(bool), text._computed_word_table())
            assert np.array_equal(t["careful"], text._computed_careful_table())
    finally:
        text._tables.cache_clear()
