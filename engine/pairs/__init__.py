"""Near-duplicate pairs, one batch at a time: candidate generators, then verification.

Every pair method writes rows ``(doc_a, doc_b, method, similarity, batch_id)``
to ``duplicates``, ``doc_a < doc_b``, found by the batch of ``doc_b``. A batch
is matched against itself and against every older document; nothing older is
compared again. Each generator's candidates depend only on the two documents
of a pair (equal keys, or a length window), so ingesting a corpus in one batch
or in many gives the same pairs.

Generators (their keys go to LMDB posting tables, so a batch finds its older
partners by lookups, not by scanning):

* ``lsh``: min-hash LSH bands. ``bands x rows`` come from the index threshold
  (``lsh_params``): the most rows per band for which a pair at the threshold
  still becomes a candidate with probability >= 0.999.
* ``simhash``/``simhash_hp``: Manku et al.'s permuted tables. The 64 bits are
  cut into ``B`` blocks and each table keys on ``B - n`` of them, so two
  simhashes within ``n`` bits agree on every block of at least one table
  (pigeonhole). Exact for ``n <= 7``; beyond that the keys get too short, and
  report 002's length window (word counts within +-20%) is searched in SQL:
  exact inside the window, pairs outside it are not looked for. A batch that
  is not tiny against the index matches the same tables by scanning instead
  (``pairs.simhash``: its simhashes sorted per table in memory, the older
  ones streamed from the catalog), with the same pairs.
* ``bottomk``: prefix filtering on the sorted sketches: a pair whose Broder
  estimate reaches the threshold shares one of the first
  ``len - ceil(t * len) + 1`` values of each sketch.
* equal keys: A0-A5, A7-A10 signatures, A6 megashingles.
* chains in SQL (``sql/chains.sql``): A11 over the bottom-k shingles, A12 over
  the 3+5 sentence signatures.

Verification: ``jaccard`` (the default) keeps the LSH candidates whose full
shingle sets have Jaccard >= threshold, computed exactly; the other methods
keep what their own similarity accepts (see ``PAIR_METHODS``).
"""


from ..settings import PAIR_METHODS
from .batch import CANDIDATE_BUDGET, FIRST_SLICE, find_batch_pairs, rebuild_pairs
from .chains import CHAIN_RATIO, SENTENCE_RATIO
from .groups import KeyGroups, key_pairs
from .keys import (EMPTY, MAX_TABLE_BITS, band_keys, candidate_postings, lsh_params, pair_methods, prefix_lengths,
                   simhash_keys, simhash_plan)
from .values import SIGNATURE_VALUES, VALUE_CACHE_BYTES, ValueCache
from .verify import (AGREEMENT_RISK, agree_enough, expected_candidate_rate, low_byte_agreements, min_agreements, set_jaccard,
                     shingle_jaccard)

__all__ = [
    "PAIR_METHODS", "pair_methods", "lsh_params", "band_keys", "simhash_plan", "simhash_keys", "prefix_lengths",
    "candidate_postings", "key_pairs", "find_batch_pairs", "rebuild_pairs", "shingle_jaccard", "expected_candidate_rate",
    "KeyGroups", "ValueCache", "CANDIDATE_BUDGET", "FIRST_SLICE", "VALUE_CACHE_BYTES", "SIGNATURE_VALUES",
    "AGREEMENT_RISK", "min_agreements", "agree_enough", "set_jaccard", "low_byte_agreements", "CHAIN_RATIO", "SENTENCE_RATIO", "EMPTY", "MAX_TABLE_BITS",
]
