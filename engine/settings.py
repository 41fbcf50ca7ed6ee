"""Index settings: fixed when an index is created, stored in the catalog's ``settings`` table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from .errors import SettingsMismatch


@dataclass(frozen=True)
class Settings:
    """Settings of one index.

    ``min_words``: records whose text has fewer words are rejected as too
    short (the seeds' collections kept documents of at least 10 words).
    """

    min_words: int = 10

    def __post_init__(self) -> None:
        if not isinstance(self.min_words, int) or self.min_words < 1:
            raise SettingsMismatch(f"min_words must be a positive integer, got {self.min_words!r}", hint="pass --min-words 1 or more")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def check_overrides(self, overrides: dict[str, Any]) -> None:
        """Raise when an explicitly given setting differs from the stored one."""
        stored = self.to_dict()
        bad = {k: v for k, v in overrides.items() if v is not None and stored.get(k) != v}
        if bad:
            desc = ", ".join(f"{k}={v!r} (index has {stored.get(k)!r})" for k, v in bad.items())
            raise SettingsMismatch(f"settings differ from the index: {desc}")
