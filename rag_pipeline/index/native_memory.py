"""Handing the memory the embedded engine freed back to the operating system.

qdrant-edge allocates with the C library's ``malloc``. When a shard closes, or an optimize has merged segments and
built their HNSW graph, glibc keeps most of the freed pages in its arenas (one per thread that allocated: the
engine's optimizer and search threads each have one), so the process's resident memory stays near its high-water
mark. A first index reopens and optimizes the index once per batch, and those held-but-free pages are what its
anonymous RSS kept growing by between batches (``bench/engine_segments.py``: after 30 batches of 3,000 points,
286 MB anonymous before ``malloc_trim(0)``, 95 MB after; docs/notes/company_scale.md). Trimming returns them, so the
next batch's peak starts from what is live. No-op where the C library is not glibc (musl, macOS).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def release_freed_memory() -> bool:
    """Return the pages ``malloc`` holds free to the operating system; True where the C library can."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
