"""Which documents a ``neardup delete`` takes: every version of some urls, what one batch added, or
the rows of ``documents`` a SQL predicate accepts.

A predicate runs as ``SELECT doc_id FROM documents WHERE (<predicate>)`` on a connection locked
down as ``neardup sql``'s is (no files, URLs or extensions, settings frozen), after a check that
the text is one expression: no comment (it could hide the closing parenthesis), no ``;``, and
parentheses that never close the one around it. Subqueries over the catalog are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from ..errors import NeardupError, QueryError, QueryRefused, SelectionError
from ..sqlfiles import query
from ..arrays import unique

#: the hint of every refused or failing ``--where``
WHERE_HINT = ("--where is one condition on the columns of documents (docs/sql.md), run read-only on the catalog, "
              "e.g. \"url LIKE 'https://old.example.org/%'\" or \"doc_id IN (SELECT doc_b FROM duplicates)\"; nothing was deleted")


@dataclass(frozen=True)
class Selection:
    """Exactly one of: ``urls`` (every version of each), ``batch`` (the versions it added),
    ``where`` (a predicate on ``documents``)."""

    urls: tuple[str, ...] = ()
    batch: int | None = None
    where: str | None = None

    def check(self) -> None:
        given = [n for n, v in (("--url", self.urls), ("--batch", self.batch is not None), ("--where", self.where is not None)) if v]
        if len(given) != 1:
            what = "none of them" if not given else " and ".join(given)
            raise SelectionError(f"give exactly one of --url, --batch or --where (got {what})")
        if self.where is not None:
            check_predicate(self.where)

    def describe(self) -> str:
        """What was selected, as the delete batch's ``source``."""
        if self.urls:
            more = f" (+{len(self.urls) - 1} more)" if len(self.urls) > 1 else ""
            return f"delete --url {self.urls[0]}{more}"
        if self.batch is not None:
            return f"delete --batch {self.batch}"
        return f"delete --where {self.where}"


def check_predicate(pred: str) -> None:
    """Refuse a ``--where`` text that is not one expression (``QueryRefused``)."""
    if not pred.strip():
        raise QueryRefused("refused: --where is empty; give a condition on documents, e.g. \"url LIKE 'https://old.example.org/%'\"", hint=WHERE_HINT)
    try:
        tokens = duckdb.tokenize(pred)
    except Exception as exc:
        raise QueryError(f"--where cannot be read: {exc}", hint=WHERE_HINT) from exc
    depth = 0
    ends = [pos for pos, _ in tokens[1:]] + [len(pred)]
    for (pos, kind), end in zip(tokens, ends):
        if kind == duckdb.token_type.comment:
            raise QueryRefused("refused: --where holds a comment; give one condition without comments", hint=WHERE_HINT)
        if kind != duckdb.token_type.operator:
            continue
        for ch in pred[pos:end]:
            if ch == ";":
                raise QueryRefused("refused: --where holds ';'; give one condition, not statements", hint=WHERE_HINT)
            depth += ch == "("
            depth -= ch == ")"
            if depth < 0:
                raise QueryRefused("refused: --where closes a parenthesis it did not open; give one condition", hint=WHERE_HINT)
    if depth:
        raise QueryRefused("refused: --where leaves a parenthesis open; give one condition", hint=WHERE_HINT)


#: applied to the connection a ``--where`` runs on (as ``neardup sql``'s, ``neardup.query``)
def _lock_down(con) -> None:
    from ..query import _LOCKDOWN

    for setting in _LOCKDOWN:
        try:
            con.execute(setting)
        except duckdb.Error as exc:
            raise NeardupError(f"cannot lock the catalog connection down ({setting}): {exc}") from exc


def select(con, sel: Selection) -> np.ndarray:
    """The doc ids ``sel`` takes, ascending (``SelectionError`` for a url or batch not in the index)."""
    if sel.urls:
        urls = list(dict.fromkeys(sel.urls))
        con.register("want", pa.table({"url": pa.array(urls, pa.string()), "pos": pa.array(range(len(urls)), pa.int64())}))
        try:
            unknown = [u for (u,) in con.execute(query("delete", "unknown_urls")).fetchall()]
            if unknown:
                shown = ", ".join(unknown[:5]) + (f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else "")
                raise SelectionError(f"{len(unknown)} url(s) not in the index: {shown}")
            rows = con.execute(query("delete", "by_url")).fetchall()
        finally:
            con.unregister("want")
    elif sel.batch is not None:
        if not con.execute(query("delete", "batch_row"), [sel.batch]).fetchall():
            lo, hi = con.execute(query("delete", "batch_range")).fetchall()[0]
            have = f"batches {lo}..{hi}" if lo is not None else "no batches"
            raise SelectionError(f"no batch {sel.batch} in the index (it has {have})")
        rows = con.execute(query("delete", "by_batch"), [sel.batch]).fetchall()
    else:
        sel.check()
        _lock_down(con)
        sql = f"SELECT doc_id FROM documents WHERE ({sel.where}) ORDER BY doc_id"
        statements = con.extract_statements(sql)
        if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
            raise QueryRefused("refused: --where is not one condition on documents", hint=WHERE_HINT)
        try:
            rows = con.execute(sql).fetchall()
        except duckdb.PermissionException as exc:
            raise QueryRefused(f"refused: --where reaches outside the catalog ({_first_line(exc)})", hint=WHERE_HINT) from exc
        except duckdb.Error as exc:
            raise QueryError(f"--where failed: {_first_line(exc)}", hint=WHERE_HINT) from exc
    return unique(np.array([r[0] for r in rows], dtype=np.int64))


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]
