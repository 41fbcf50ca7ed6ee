"""Named SQL blocks and migrations."""

from __future__ import annotations

import pytest

from neardup import sqlfiles


def test_parse_blocks_names_and_bodies():
    text = "-- name: a\n-- says a\nSELECT 1;\n\n-- name: b_2\n-- says b\nSELECT\n  2;\n"
    assert sqlfiles.parse_blocks(text) == {"a": "SELECT 1;", "b_2": "SELECT\n  2;"}


def test_duplicate_block_names_are_refused():
    with pytest.raises(ValueError, match="defined twice"):
        sqlfiles.parse_blocks("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;")


def test_unknown_block_names_the_file():
    with pytest.raises(KeyError, match="sql/catalog.sql"):
        sqlfiles.query("catalog", "no_such_block")


def test_migrations_are_numbered_from_one_without_gaps():
    versions = [v for v, _, _ in sqlfiles.migrations()]
    assert versions == list(range(1, len(versions) + 1))


def test_every_catalog_block_has_a_description():
    from importlib import resources

    text = resources.files("neardup.sql").joinpath("catalog.sql").read_text()
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("-- name:"):
            assert lines[i + 1].startswith("-- ") and len(lines[i + 1]) > 5, ln
