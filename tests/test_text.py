"""Text extraction and normalisation: exact small cases."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import text


def arr(*xs):
    return pa.array(list(xs), pa.large_string())


def test_html_to_text_drops_scripts_styles_comments_and_keeps_title():
    html = (
        "<html><head><title>Page title</title><style>p{color:red}</style><script>var x = 'hidden';</script></head>"
        "<body><!-- a comment --><p>Hello <b>bold</b> world.</p><noscript>no</noscript><div>Next &amp; last</div></body></html>"
    )
    out = text.clean_whitespace(arr(text.html_to_text(html))).to_pylist()[0]
    assert out == "Page title\nHello bold world.\nNext & last"


def test_html_block_elements_break_lines_inline_do_not():
    html = "<body><h1>Head</h1><p>one <i>two</i>three</p><ul><li>a</li><li>b</li></ul></body>"
    out = text.clean_whitespace(arr(text.html_to_text(html))).to_pylist()[0]
    assert out == "Head\none twothree\na\nb"


def test_clean_whitespace():
    got = text.clean_whitespace(arr("  a \t b\r\n\r\n  c  \n\n\n d ", "", None)).to_pylist()
    assert got == ["a b\nc\nd", "", None]


def _clean_by_regex(texts: pa.Array) -> pa.Array:
    """``clean_whitespace`` as its docstring defines it: three RE2 replacements and a trim."""
    t = pc.replace_substring_regex(texts, r"\r\n?", "\n")
    t = pc.replace_substring_regex(t, rf"[ {text._HSPACES}]{{2,}}|[{text._HSPACES}]", " ")
    t = pc.replace_substring_regex(t, r" ?\n[\s]*", "\n")
    return pc.utf8_trim_whitespace(t)


# white space of every kind the definition names, some it does not (NEL, line and paragraph separators,
# zero-width space), characters sharing their UTF-8 lead bytes, and plain letters
_SPACEY = st.sampled_from(list(" \t\x0b\x0c\r\n\xa0\u1680\u2000\u2005\u200a\u200b\u202f\u205f\u3000\x85\u2028\u2029"
                               "\u2010\u20ac\u3001\u1681\xa9\xc2ab.é😀"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(_SPACEY, max_size=40)), max_size=8), st.integers(0, 3))
def test_clean_whitespace_is_its_regex_definition(texts, start):
    a = pa.array(texts, pa.large_string())
    assert text.clean_whitespace(a).to_pylist() == _clean_by_regex(a).to_pylist()
    part = a.slice(min(start, len(a)))  # an array that does not start at its buffers' start
    assert text.clean_whitespace(part).to_pylist() == _clean_by_regex(part).to_pylist()


def test_normal_form_nfkc_and_casefold():
    got = text.normal_form(arr("Straße ＡＢＣ ﬁne ПРИВЕТ Ёлка", None)).to_pylist()
    assert got == ["strasse abc fine привет ёлка", None]


def test_words_unicode_latin_and_cyrillic():
    normal = text.normal_form(arr("Hello, мир! don't 42x Vec<T>"))
    assert text.words(normal).to_pylist() == [["hello", "мир", "don", "t", "42x", "vec", "t"]]
    assert text.count_words(normal).tolist() == [7]


def test_sentences_split_on_terminal_punctuation_and_lines():
    t = text.normal_form(arr("First one. Second one! Third?\nA heading\n... \n«Last…» end", "", "Один. Два три?!  Четыре"))
    assert text.sentences(t).to_pylist() == [
        ["first one", "second one", "third", "a heading", "last", "end"],
        [],
        ["один", "два три", "четыре"],
    ]
    assert text.count_sentences(t).tolist() == [6, 0, 3]


def test_decimal_point_and_abbreviation_inside_words():
    t = text.normal_form(arr("Version 3.11 is out. Yes", "see e.g. this"))
    assert text.sentences(t).to_pylist() == [["version 3.11 is out", "yes"], ["see e.g", "this"]]


def test_words_never_run_across_strings():
    t = arr("ends with word", "word starts", "")
    assert text.words(t).to_pylist() == [["ends", "with", "word"], ["word", "starts"], []]
    assert text.count_sentences(t).tolist() == [1, 1, 0]


def test_normal_form_ascii_fast_path_agrees_with_python():
    xs = ["ASCII Only Text", "Mixed ÀÉ text", None, "", "ǅ ﬀ Ⅻ ＡＢ"]
    import unicodedata

    assert text.normal_form(arr(*xs)).to_pylist() == [None if x is None else unicodedata.normalize("NFKC", x).casefold() for x in xs]


# characters where Arrow's lowercasing and str.casefold part ways, plus cased letters of plane 1
_FOLD_TRICKY = "ßẞΣσςİıŉǰﬁﬀ\u13a0\u13f8\uab70ᲀꭰ\U00010400\U00010428\U0001e900\U00020000ÀÉЁ "


# characters NFKC changes alone, reorders, or composes with what comes before or after them
_NFKC_TRICKY = "…ﬁ™①ｶﾞ\u0301\u0327\u0308\u0344\u0f73e\u1100\u1161\u11a8가각\u0915\u093c\u09c7\u09be\u0b47\u0b3e\u2126\uf900\n\n\r "


@given(st.lists(st.text(alphabet=st.sampled_from(_FOLD_TRICKY + _NFKC_TRICKY) | st.characters(codec="utf-8"), max_size=40),
                max_size=8))
def test_normal_form_is_nfkc_then_casefold(xs):
    import unicodedata

    assert text.normal_form(arr(*xs)).to_pylist() == [unicodedata.normalize("NFKC", x).casefold() for x in xs]


@given(st.lists(st.none() | st.text(alphabet=st.sampled_from(_FOLD_TRICKY + _NFKC_TRICKY + "\n\nAb") | st.characters(codec="utf-8"),
                                    max_size=40), max_size=8), st.integers(0, 3))
def test_normal_form_of_a_slice_with_nulls_and_lines(xs, cut):
    # the strings of an array's slice (Arrow offsets), nulls among them, lines Python must see
    # anywhere in a string (first, last, several, after an empty line)
    import unicodedata

    whole = arr("ſ\nX", *xs)
    part = whole.slice(min(cut, len(whole)))
    want = [None if x is None else unicodedata.normalize("NFKC", x).casefold() for x in part.to_pylist()]
    assert text.normal_form(part).to_pylist() == want


def test_normal_form_replaces_exactly_the_lines_python_must_see():
    import unicodedata

    xs = ["ﬁrst\nPlain\n\nＡＢ\nlast ™", "\n™\n", "no newline Σ", "Plain\nPLAIN ÀÉ\n", "™", "\n\n", "x\n", None]
    got = text.normal_form(arr(*xs)).to_pylist()
    assert got == [None if x is None else unicodedata.normalize("NFKC", x).casefold() for x in xs]
    assert got[0] == "first\nplain\n\nab\nlast tm"


def test_normal_form_of_every_code_point_in_context():
    # each non-ASCII code point of planes 0 and 1 alone, after a letter and a Hangul leading
    # consonant, before a combining mark and a Hangul vowel, and on a line of its own: exactly
    # Python's NFKC then casefold (the characters left to Arrow are safe wherever they stand)
    import unicodedata

    cps = text._checked_code_points()
    # U+0334 (combining class 1) is in no decomposition: marks of higher class are reordered after it
    contexts = ["{}", "e{}", "\u1100{}", "{}\u0301", "{}\u0334", "{}\u1161", "x\n{}\ny"]
    xs = [ctx.format(chr(c)) for ctx in contexts for c in cps]
    # and every canonical pair composed again (the second of some has combining class 0)
    for c in cps:
        d = unicodedata.decomposition(chr(c)).split()
        if len(d) == 2 and not d[0].startswith("<"):
            xs.append(chr(int(d[0], 16)) + chr(int(d[1], 16)))
    assert text.normal_form(arr(*xs)).to_pylist() == [unicodedata.normalize("NFKC", x).casefold() for x in xs]


@pytest.mark.parametrize("s, want", [
    ("a\U000E0100b", ["a\U000E0100b"]),  # a variation selector of plane 14 is a mark (Mn): inside the word
    ("\U000E0100", ["\U000E0100"]),
    ("x\U000E0001y", ["x", "y"]),  # a tag character (Cf) separates words
    ("\U0010FFFD z", ["z"]),  # private use: not a word character
])
def test_word_characters_beyond_the_first_planes(s, want):
    assert text.words(text.normal_form(arr(s))).to_pylist() == [want]


@given(st.lists(st.text(max_size=60), max_size=8))
def test_counts_match_list_lengths_and_a_reference_tokenizer(xs):
    import unicodedata

    normal = text.normal_form(arr(*xs))
    got = text.words(normal).to_pylist()
    assert text.count_words(normal).tolist() == [len(w) for w in got]
    assert text.count_sentences(normal).tolist() == [len(s) for s in text.sentences(normal).to_pylist()]
    # reference: split on every character outside categories L, M, N
    for s, ws in zip(normal.to_pylist(), got):
        ref = "".join(c if unicodedata.category(c)[0] in "LMN" else " " for c in s).split()
        assert ws == ref


@given(st.lists(st.text(alphabet=st.sampled_from("ab .!?\n\t,»)"), max_size=40), max_size=6))
def test_sentences_against_a_reference_splitter(xs):
    import re

    normal = text.normal_form(arr(*xs))
    for s, got in zip(xs, text.sentences(normal).to_pylist()):
        pieces = re.split(r"[.!?](?=[\s»)]|$)|\n", s)
        ref = [re.sub(r"^[^ab]+|[^ab]+$", "", p) for p in pieces]
        assert got == [p for p in ref if p]


@given(st.text(max_size=80))
def test_words_are_nonempty_and_contain_no_separator(s):
    for w in text.words(text.normal_form(arr(s))).to_pylist()[0]:
        assert w
        assert not any(ch.isspace() or ch in ".,;:!?" for ch in w)


@given(st.lists(st.text(max_size=80), max_size=8), st.integers(0, 2**63 - 1))
def test_compiled_tokenizer_matches_the_numpy_definition_and_xxh64(xs, seed):
    import numpy as np
    import xxhash

    normal = text.normal_form(arr(*xs))
    fast, ref = text.analyze(normal, seed), text.analyze_reference(normal)
    lazy = text.analyze(normal, seed, spans=False)  # positions made on first use
    assert lazy.spans is None
    for f in ("word_starts", "word_ends", "word_counts", "sentence_first", "sentence_counts"):
        assert np.array_equal(getattr(fast, f), getattr(ref, f)), f
        assert np.array_equal(getattr(lazy, f), getattr(ref, f)), f
    assert np.array_equal(lazy.word_hashes, fast.word_hashes)
    words = [w for ws in text.words(normal).to_pylist() for w in ws]
    assert fast.word_hashes.tolist() == [xxhash.xxh64_intdigest(w.encode(), seed) for w in words]
    assert np.array_equal(fast.in_word, text.word_spans(normal)[1])


# ASCII letters and digits in runs (the tokenizer's own loop for them), the separators and sentence
# ends around them, and non-ASCII characters inside and between words: letters, marks, a letter of
# plane 1, and non-word characters (dash, no-break space, quotes, guillemet)
_MIXED_WORDS = "abcxyz0189 .!?\n\t,'\")]" + "éßЖ中\u0301\U00010400" + "—\u00a0”’»"


@given(st.lists(st.text(alphabet=st.sampled_from(_MIXED_WORDS), max_size=120), max_size=8), st.integers(0, 2**63 - 1))
def test_tokenizer_on_ascii_runs_mixed_with_other_characters(xs, seed):
    import numpy as np
    import xxhash

    normal = text.normal_form(arr(*xs))
    fast, ref = text.analyze(normal, seed), text.analyze_reference(normal)
    for f in ("word_starts", "word_ends", "word_counts", "sentence_first", "sentence_counts"):
        assert np.array_equal(getattr(fast, f), getattr(ref, f)), f
    assert np.array_equal(text.analyze(normal, seed, spans=False).word_hashes, fast.word_hashes)
    words = [w for ws in text.words(normal).to_pylist() for w in ws]
    assert fast.word_hashes.tolist() == [xxhash.xxh64_intdigest(w.encode(), seed) for w in words]


@given(st.lists(st.lists(st.text(alphabet=st.sampled_from("ab\u00e9 "), max_size=30), min_size=1, max_size=6), max_size=6),
       st.data())
def test_replace_lines_against_a_line_by_line_copy(strings, data):
    # strings of lines (empty ones among them, lines of 8 bytes and more), some lines replaced:
    # the copy is each string's lines joined again with the replaced ones in their place
    import numpy as np

    from neardup import fold_kernels

    joined = ["\n".join(lines) for lines in strings]
    raw = [s.encode() for s in joined]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(b) for b in raw], out=offsets[1:])
    picks = [(r, i) for r, lines in enumerate(strings) for i in range(len(lines)) if data.draw(st.booleans())]
    repl = [data.draw(st.text(alphabet="XYZ\u00c9", min_size=1, max_size=12)).encode() for _ in picks]
    repl_offsets = np.zeros(len(repl) + 1, np.int64)
    np.cumsum([len(b) for b in repl], out=repl_offsets[1:])
    out, out_offsets = fold_kernels.replace_lines(np.frombuffer(b"".join(raw) or b"", np.uint8), offsets,
                                                  np.array([r for r, _ in picks], np.int64), np.array([i for _, i in picks], np.int64),
                                                  np.frombuffer(b"".join(repl) or b"", np.uint8), repl_offsets)
    by_pick = dict(zip(picks, repl))
    want = ["\n".join(by_pick.get((r, i), line.encode()).decode() for i, line in enumerate(lines)) for r, lines in enumerate(strings)]
    got = [bytes(out[out_offsets[r]:out_offsets[r + 1]]).decode() for r in range(len(strings))]
    assert got == want
