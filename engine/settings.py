"""Index settings: fixed when an index is created, stored in the catalog's ``settings`` table."""

from __future__ import annotations

import math
from dataclasses import InitVar, asdict, dataclass, field, fields
from typing import Any

from .errors import SettingsMismatch

#: Fingerprint methods and what each computes (tables in docs/sql.md).
METHODS: dict[str, str] = {
    "shingles": "word shingles: each document's full distinct shingle-hash set (sorted)",
    "chars": "character shingles: the distinct set of character n-gram hashes",
    "bottomk": "n minimal elements in one permutation (bottom-k sketch of the shingle set)",
    "minhash": "minimal elements in n permutations (classic min-hash of the shingle set)",
    "simhash": "64-bit simhash, Charikar's bit-sum over word hashes",
    "simhash_hp": "64-bit simhash by 64 random hyperplanes (report 002)",
    "a0": "A0 MD5 of the whole text after the RCDL preprocessing",
    "a6": "A6 megashingles: 84 min-hashes -> 6 supershingles of 14 -> 15 megashingles",
    "a6_36": "A6 variant the RCDL authors ran: 36 min-hashes -> 6 supershingles of 6 -> 15 megashingles",
    "a8": "A8 LogShingles: 5-word shingles with wrap-around, kept when divisible by a power of 2",
    "lexical": "000's lexical image: the terms whose collection frequency lies in [0.00001, 0.5] of the largest",
    "a1": "A1 TF: CRC32 of the 6 most frequent terms, alphabetical",
    "a2": "A2 TF*IDF: CRC32 of the 6 terms of largest BM25 weight (k=2, b=0.75), alphabetical",
    "a3": "A3 TF*RIDF: CRC32 of the 6 terms of largest TF*RIDF, alphabetical",
    "a4": "A4 LongSent: CRC32 of the 2 longest sentences, alphabetical",
    "a5": "A5 HeavySent: CRC32 of the 2 sentences of largest A2 weight, alphabetical",
    "a7": "A7 LexRand: I-Match SHA1 of the lexicon terms plus 10 randomly thinned lexicons",
    "a9": "A9 DescrWords: bit vector of support words above their own relative-TF thresholds",
    "a10": "A10 OptFreq: CRC32 of the 6 terms of largest TF*IDF_opt, alphabetical",
    "a12": "A12 3+5 records: signatures of the 3 longest sentences and 5 longest words, length, sentences",
}

#: Pair methods (rows of ``duplicates``) and what their ``similarity`` is (docs/pairs.md).
PAIR_METHODS: dict[str, str] = {
    "jaccard": "exact Jaccard of the word-shingle sets (>= threshold); candidates from min-hash LSH bands",
    "minhash": "share of equal min-hash positions (>= threshold); candidates from LSH bands",
    "bottomk": "Broder's estimate |k-min(A u B) n A n B| / |k-min(A u B)| from the bottom-k sketches (>= threshold)",
    "simhash": "1 - d/64 for simhashes d <= simhash_bits bits apart",
    "simhash_hp": "1 - d/64 for hyperplane simhashes d <= simhash_bits bits apart",
    "a0": "1.0: equal MD5 of the preprocessed text",
    "a1": "1.0: equal A1 signature",
    "a2": "1.0: equal A2 signature",
    "a3": "1.0: equal A3 signature",
    "a4": "1.0: equal A4 signature",
    "a5": "1.0: equal A5 signature",
    "a6": "shared supershingles / 6, for documents sharing a megashingle",
    "a6_36": "shared supershingles / 6, for documents sharing a megashingle",
    "a7": "share of the 11 LexRand signatures that are equal (at least one)",
    "a8": "1.0: equal A8 signature",
    "a9": "1.0: equal A9 bit vector",
    "a10": "1.0: equal A10 signature",
    "a11": "exact Jaccard (>= threshold) of pairs in one A11 chain window (decomposition over bottom-k shingles)",
    "a12": "shared word signatures / 5, for pairs passing A12's rules",
}
#: pair methods whose similarity is always 1.0 (equal keys): a similarity threshold changes nothing for them
EQUAL_KEY_PAIRS = frozenset({"a0", "a1", "a2", "a3", "a4", "a5", "a8", "a9", "a10"})
#: fingerprint methods a pair method reads (otherwise the one of its own name)
PAIR_REQUIRES: dict[str, tuple[str, ...]] = {"jaccard": ("shingles", "minhash"), "a11": ("shingles", "bottomk")}
#: pair methods computed by default, where their fingerprints are enabled
DEFAULT_PAIRS = ("jaccard", "simhash")

#: Clusterings kept current by every ingest (the others run on request: ``neardup rebuild --clusters``).
INCREMENTAL_CLUSTERS: dict[str, str] = {
    "concept": "maximal sets of documents whose bottom-k sketches share >= concept_support elements (000/001)",
    "components": "connected components of the duplicate graph of the first pair method (jaccard by default)",
}

DEFAULT_METHODS = ("shingles", "bottomk", "minhash", "simhash")
#: The text of HTML input that is fingerprinted (``neardup.readers.content``; docs/architecture.md says
#: why main is the default: measured on a real site crawled in two releases, docs/benchmarks.md).
CONTENT_MODES: dict[str, str] = {
    "main": "HTML input: the page's main content (resiliparse); its full text when that has fewer than min_words words",
    "full": "the whole visible text of every page, frame included",
}
DEFAULT_CONTENT = "main"
PERMUTATIONS = ("universal", "matrix")
#: methods computed from word hashes and counts alone (no word or sentence positions)
SPANLESS_METHODS = frozenset({"shingles", "bottomk", "minhash", "simhash", "chars"})
#: pair methods whose candidates come from min-hash LSH bands, and the chance a pair at the
#: threshold must have of becoming a candidate (``pairs.lsh_params``'s target)
LSH_PAIRS = ("jaccard", "minhash")
LSH_RECALL = 0.999


@dataclass(frozen=True)
class Settings:
    """Settings of one index (see docs/cli.md, `neardup init`).

    ``min_words``: records whose text has fewer words are rejected as too
    short (the seeds' collections kept documents of at least 10 words).
    ``seed``: seeds every hash and permutation. ``methods``: the fingerprint
    methods computed at ingest. ``shingle_size``/``shingle_offset``: words per
    shingle and the step between shingle starts. ``char_shingle_size``:
    characters per character shingle. ``bottomk``: sketch size of the
    bottom-k method. ``minhash_perms``: permutations of the min-hash method.
    ``permutation``: ``universal`` (multiply-add mod 2^64) or ``matrix`` (the
    seeds' random binary matrices). ``content``: the text of HTML input the
    fingerprints are computed from, ``main`` (the page's main content) or
    ``full`` (its whole visible text; ``CONTENT_MODES``).

    Each setting is checked on its own, then against the others
    (``check_combination``): a combination that cannot work raises
    ``SettingsMismatch`` when the settings are made, so before an index is
    created. Settings read back from an index (``from_dict``) skip that
    second step, so an index created before a check existed still opens.
    """

    min_words: int = 10
    seed: int = 0
    methods: tuple[str, ...] = field(default=DEFAULT_METHODS)
    shingle_size: int = 5
    shingle_offset: int = 1
    char_shingle_size: int = 5
    bottomk: int = 100
    minhash_perms: int = 100
    permutation: str = "universal"
    threshold: float = 0.8
    simhash_bits: int = 3
    pairs: tuple[str, ...] | None = None
    clusters: tuple[str, ...] | None = None
    concept_support: int | None = None
    content: str = DEFAULT_CONTENT
    #: True for settings read back from an index: the combination is not checked again
    stored: InitVar[bool] = False

    def __post_init__(self, stored: bool = False) -> None:
        object.__setattr__(self, "methods", tuple(self.methods))
        for name in ("min_words", "shingle_size", "shingle_offset", "char_shingle_size", "bottomk", "minhash_perms"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                option = "--sketch bottom-k:N with N" if name == "bottomk" else f"--{name.replace('_', '-')}"
                raise SettingsMismatch(f"{name} must be a positive integer, got {v!r}", hint=f"pass {option} 1 or more")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise SettingsMismatch(f"seed must be an integer in [0, 2^63), got {self.seed!r}", hint="pass --seed 0 or another integer")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise SettingsMismatch(f"unknown method(s) {', '.join(unknown)}", hint=f"choose from {', '.join(METHODS)}")
        if len(set(self.methods)) != len(self.methods):
            raise SettingsMismatch(f"a method is named twice in {','.join(self.methods)}", hint="name each method once")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) or not 0 < self.threshold <= 1:
            raise SettingsMismatch(f"threshold must be a number in (0, 1], got {self.threshold!r}", hint="pass --threshold 0.8 or another Jaccard level")
        object.__setattr__(self, "threshold", float(self.threshold))
        if not isinstance(self.simhash_bits, int) or isinstance(self.simhash_bits, bool) or not 0 <= self.simhash_bits <= 32:
            raise SettingsMismatch(f"simhash_bits must be an integer in [0, 32], got {self.simhash_bits!r}", hint="pass --simhash-bits 3 (5, 10, 15 as in report 002)")
        if self.pairs is None:
            object.__setattr__(self, "pairs", tuple(p for p in DEFAULT_PAIRS if set(requires(p)) <= set(self.methods)))
        object.__setattr__(self, "pairs", tuple(self.pairs))
        unknown = [p for p in self.pairs if p not in PAIR_METHODS]
        if unknown:
            raise SettingsMismatch(f"unknown pair method(s) {', '.join(unknown)}", hint=f"choose from {', '.join(PAIR_METHODS)}")
        for p in self.pairs:
            missing = [m for m in requires(p) if m not in self.methods]
            if missing:
                raise SettingsMismatch(f"pair method {p} needs the fingerprint method(s) {', '.join(missing)}", hint=f"add {','.join(missing)} to --methods")
        if self.clusters is None:
            default = (["concept"] if "bottomk" in self.methods else []) + (["components"] if self.pairs else [])
            object.__setattr__(self, "clusters", tuple(default))
        object.__setattr__(self, "clusters", tuple(self.clusters))
        for c in self.clusters:
            if c not in INCREMENTAL_CLUSTERS:
                raise SettingsMismatch(f"unknown incremental clustering {c!r}", hint=f"choose from {', '.join(INCREMENTAL_CLUSTERS)}; others run with neardup rebuild --clusters")
        if "concept" in self.clusters and "bottomk" not in self.methods:
            raise SettingsMismatch("clustering concept needs the bottomk fingerprints", hint="add bottomk to --methods")
        if "components" in self.clusters and not self.pairs:
            raise SettingsMismatch("clustering components needs a pair method", hint="pass --pairs")
        if self.concept_support is not None and (not isinstance(self.concept_support, int) or isinstance(self.concept_support, bool) or self.concept_support < 1):
            raise SettingsMismatch(f"concept_support must be a positive integer, got {self.concept_support!r}", hint="pass --concept-support 85 (of a 100-element sketch)")
        if self.content not in CONTENT_MODES:
            raise SettingsMismatch(f"unknown content {self.content!r}", hint=f"pass --content {' or '.join(CONTENT_MODES)}")
        if self.permutation not in PERMUTATIONS:
            raise SettingsMismatch(f"unknown permutation scheme {self.permutation!r}", hint="use universal or matrix")
        if not stored:
            self.check_combination()

    def check_combination(self) -> None:
        """Raise ``SettingsMismatch`` for settings that are each valid but cannot work together.

        * ``concept_support`` is at most the bottom-k sketch size (a concept
          cluster's members share that many sketch elements: more than the
          sketch holds would silently give no clusters), and needs the bottomk
          fingerprints;
        * ``shingle_offset`` is at most ``shingle_size`` (a bigger step puts
          the words between two shingles in none);
        * with the ``jaccard`` or ``minhash`` pairs, ``minhash_perms`` are
          enough for the LSH bands to make a pair at ``threshold`` a candidate
          with probability >= 0.999 (one row per band is the most they can do:
          ``1 - (1 - threshold)^minhash_perms``).
        """
        if self.concept_support is not None:
            if "bottomk" not in self.methods:
                raise SettingsMismatch(f"concept_support {self.concept_support} needs the bottomk fingerprints, which --methods leaves out",
                                       hint="add bottomk to --methods, or drop --concept-support")
            if self.concept_support > self.bottomk:
                raise SettingsMismatch(
                    f"concept_support {self.concept_support} is more than the bottom-k sketch size {self.bottomk}: "
                    "no two documents could share that many sketch elements, so there would be no concept clusters",
                    hint=f"pass --concept-support {self.bottomk} or less (the default is ceil(threshold x sketch size), "
                         f"{math.ceil(self.threshold * self.bottomk - 1e-9)}), or a bigger --sketch bottom-k:N")
        if self.shingle_offset > self.shingle_size:
            raise SettingsMismatch(
                f"shingle_offset {self.shingle_offset} is more than shingle_size {self.shingle_size}: "
                f"{self.shingle_offset - self.shingle_size} word(s) between two shingles would be in no shingle",
                hint=f"pass --shingle-offset {self.shingle_size} or less (1, the default, takes every shingle), or a bigger --shingle-size")
        lsh = [p for p in self.pairs if p in LSH_PAIRS]
        if lsh and lsh_recall(self.threshold, self.minhash_perms) < LSH_RECALL:
            need = min_lsh_perms(self.threshold)
            raise SettingsMismatch(
                f"minhash_perms {self.minhash_perms} is too few for the LSH bands of the {','.join(lsh)} pairs at threshold "
                f"{self.threshold:g}: a pair at the threshold would be a candidate with probability "
                f"{lsh_recall(self.threshold, self.minhash_perms):.4f}, under {LSH_RECALL}",
                hint=f"pass --minhash-perms {need} or more, or a higher --threshold")

    @property
    def support(self) -> int:
        """Common sketch elements a concept cluster needs: ``concept_support``, else
        ``ceil(threshold * bottomk)``."""
        return self.concept_support if self.concept_support is not None else math.ceil(self.threshold * self.bottomk - 1e-9)

    @property
    def component_pairs(self) -> str | None:
        """The pair method whose graph ``components`` follows."""
        return "jaccard" if "jaccard" in (self.pairs or ()) else (self.pairs[0] if self.pairs else None)

    @property
    def needs_spans(self) -> bool:
        """Whether some enabled method reads word or sentence positions (see ``text.analyze``)."""
        return any(m not in SPANLESS_METHODS for m in self.methods)

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON values: every sequence (methods, pairs, clusters) a list."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        known = {f.name for f in fields(cls)}
        d = {"content": "full", **d}  # an index made before the setting existed fingerprinted the full text
        return cls(**{k: v for k, v in d.items() if k in known}, stored=True)

    def check_overrides(self, overrides: dict[str, Any]) -> None:
        """Raise when an explicitly given setting differs from the stored one."""
        stored = self.to_dict()  # sequences as lists, like the given ones below
        given = {k: (list(v) if isinstance(v, tuple) else v) for k, v in overrides.items() if v is not None}
        bad = {k: v for k, v in given.items() if stored.get(k) != v}
        if bad:
            desc = ", ".join(f"{k}={v!r} (index has {stored.get(k)!r})" for k, v in bad.items())
            raise SettingsMismatch(f"settings differ from the index: {desc}")


def lsh_recall(threshold: float, perms: int) -> float:
    """The most likely LSH makes a pair of Jaccard ``threshold`` a candidate with ``perms``
    min-hashes: one row per band, ``1 - (1 - threshold)^perms``."""
    return 1 - (1 - threshold) ** perms


def min_lsh_perms(threshold: float) -> int:
    """The fewest min-hash permutations with ``lsh_recall >= LSH_RECALL`` at ``threshold``."""
    if threshold >= 1:
        return 1
    n = max(1, math.ceil(math.log(1 - LSH_RECALL) / math.log(1 - threshold)) - 1)
    while lsh_recall(threshold, n) < LSH_RECALL:
        n += 1
    return n


def requires(pair_method: str) -> tuple[str, ...]:
    """The fingerprint methods a pair method reads."""
    return PAIR_REQUIRES.get(pair_method, (pair_method,))


def parse_pairs(text: str, methods: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """``"jaccard,a12"`` -> ``("jaccard", "a12")``; ``"all"``: every pair method whose
    fingerprints are in ``methods`` (the defaults when None)."""
    if text.strip() == "all":
        on = set(methods or DEFAULT_METHODS)
        return tuple(p for p in PAIR_METHODS if set(requires(p)) <= on)
    if text.strip() == "":
        return ()
    return tuple(x.strip() for x in text.split(",") if x.strip())


def parse_methods(text: str) -> tuple[str, ...]:
    """``"minhash,simhash"`` -> ``("minhash", "simhash")`` (validated by ``Settings``)."""
    return tuple(m.strip().lower() for m in text.split(",") if m.strip())


def parse_sketch(text: str) -> int:
    """``"bottom-k:150"`` -> 150."""
    kind, _, size = text.partition(":")
    if kind.strip().lower() not in ("bottom-k", "bottomk", "n-min") or not size.strip().isdigit():
        raise SettingsMismatch(f"cannot read --sketch {text!r}", hint="write it as bottom-k:N, e.g. bottom-k:150")
    return int(size)
