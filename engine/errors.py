"""Exceptions raised by neardup. Each carries a hint that says what to do."""

from __future__ import annotations


class NeardupError(Exception):
    """Base class of every error neardup raises on purpose."""

    hint: str = ""
    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base}\n  hint: {self.hint}" if self.hint else base


class IndexNotFound(NeardupError):
    """The index folder does not exist or holds no catalog."""

    hint = "create it with `neardup init --index DIR` or ingest into it with `neardup ingest`"
    exit_code = 3


class IndexLocked(NeardupError):
    """Another process is writing to the index."""

    hint = "wait for that process to finish (or stop it); a killed writer releases the lock by itself"
    exit_code = 4


class IndexBusy(NeardupError):
    """The catalog cannot be opened because a writer holds it."""

    hint = "readers work while no write is in progress; try again when the ingest has finished"
    exit_code = 4


class SchemaTooNew(NeardupError):
    """The catalog was written by a newer neardup."""

    hint = "upgrade neardup (pip install -U neardup)"
    exit_code = 3


class SettingsMismatch(NeardupError):
    """Settings given on the command line contradict those stored in the index."""

    hint = "index settings are fixed at creation; use a new --index or drop the option"
    exit_code = 2


class InputError(NeardupError):
    """An input file cannot be read at all (missing, unknown format, unreadable reference file)."""

    hint = "check the path and that the file can be read"
    exit_code = 2


class BadRecord(NeardupError):
    """A record was rejected and --strict turned the reject into a failure."""

    hint = "the batch was rolled back; fix the record or run without --strict to skip bad records"
    exit_code = 5

    def __init__(self, source: str, record: str, reason: str):
        super().__init__(f"{source}: {record}: {reason}")
        self.source, self.record, self.reason = source, record, reason


class QueryError(NeardupError):
    """A SQL query given by the user failed."""

    hint = "see docs/sql.md for the tables and views of the catalog"
    exit_code = 2


class QueryRefused(QueryError):
    """``neardup sql`` refused a statement: it only reads the catalog, nothing else."""

    hint = (
        "`neardup sql` runs one SELECT (or EXPLAIN of one) on the catalog and nothing else; "
        "the index is changed only by `neardup ingest`, `neardup delete` and `neardup rebuild` (see docs/cli.md)"
    )
    exit_code = 2


class StorageError(NeardupError):
    """A file neardup must write or read cannot be: a read-only folder, no permission, a full disk, an I/O error.

    ``path`` is the file or folder concerned, ``kind`` one of ``neardup.storage.KINDS``.
    """

    hint = "check that the index folder can be written and that its disk has room, then run the command again"
    exit_code = 8

    def __init__(self, message: str, hint: str | None = None, path: str | None = None, kind: str = "os error"):
        super().__init__(message, hint)
        self.path, self.kind = path, kind


class CatalogDamaged(NeardupError):
    """``catalog.duckdb`` cannot be read: its header or a block in use is damaged."""

    hint = ("run `neardup check --index DIR` to see what is damaged, then restore the index folder from a backup "
            "(`neardup backup` makes one): the catalog is the source of truth and nothing can re-derive it")
    exit_code = 7

    def __init__(self, message: str, hint: str | None = None, path: str | None = None, detail: str = ""):
        super().__init__(message, hint)
        self.path, self.detail = path, detail


class PostingsDamaged(NeardupError):
    """The LMDB postings cannot be opened or read (they are derived from the catalog: a rebuild repairs them)."""

    hint = ("run `neardup rebuild --postings --index DIR`: it re-derives the postings from the catalog "
            "(`neardup sql` and `info` keep working meanwhile)")
    exit_code = 6

    def __init__(self, message: str, hint: str | None = None, path: str | None = None, detail: str = ""):
        super().__init__(message, hint)
        self.path, self.detail = path, detail


class SelectionError(NeardupError):
    """``neardup delete`` was given a selection it cannot take: none or several of --url/--batch/--where,
    a url or batch the index does not hold. Nothing is deleted."""

    hint = ("nothing was deleted; `neardup delete --dry-run` shows what a selection takes, "
            "`neardup sql \"SELECT url FROM documents WHERE url LIKE '%...%'\"` finds urls (see docs/cli.md)")
    exit_code = 2


class MissingExtra(NeardupError):
    """An optional dependency the command needs is not installed."""

    hint = "install the extra: pip install 'neardup[dask]'"
    exit_code = 2


class OutputExists(NeardupError):
    """The output folder of a build already holds files."""

    hint = "name an empty or new folder, or pass --force to replace it"
    exit_code = 2
