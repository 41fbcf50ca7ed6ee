"""Shared helpers for the tests."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# compiled kernels (numba) compile on first use: no per-example deadline
hypothesis_settings.register_profile("neardup", deadline=None)
hypothesis_settings.load_profile("neardup")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def words_text(n: int, seed: int = 0, prefix: str = "w") -> str:
    """A text of ``n`` distinct-ish words in sentences of 8 words."""
    ws = [f"{prefix}{(seed * 7919 + i * 31) % 100003}" for i in range(n)]
    sents = [" ".join(ws[i : i + 8]) + "." for i in range(0, n, 8)]
    return " ".join(sents)


def write_jsonl(path: Path, records: list[dict], compress: str | None = None) -> Path:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    if compress == "gz":
        data = gzip.compress(data, mtime=0)
    elif compress == "zst":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def run_cli(*args: str, env: dict | None = None, input: bytes | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run ``neardup`` as a real subprocess (the installed console script's module)."""
    e = dict(os.environ)
    e.pop("NEARDUP_CRASH_AT", None)
    if env:
        e.update(env)
    code = "from neardup.cli.app import main; main()"
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, env=e, input=input, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"neardup {' '.join(args)} failed ({p.returncode}):\n{p.stdout.decode()}\n{p.stderr.decode()}")
    return p


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    return tmp_path / "idx"
