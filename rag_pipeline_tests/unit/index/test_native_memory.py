"""index/native_memory.py: pages ``malloc`` holds free go back to the operating system, and the embedded store
hands them back when it closes."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from rag_pipeline.index import edge_store, native_memory


def _rss_anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_freed_pages_held_by_malloc_are_returned() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    blocks = []
    for _ in range(150_000):  # ~150 MB in 1 KB blocks: below the mmap threshold, so from the heap
        block = libc.malloc(1024)
        libc.memset(block, 1, 1024)  # touched: resident
        blocks.append(block)
    last = blocks.pop()  # kept: it pins the heap's top, so free() alone cannot shrink the heap
    for block in blocks:
        libc.free(block)
    held = _rss_anon_mb()
    assert native_memory.release_freed_memory() is True
    released = _rss_anon_mb()
    libc.free(last)
    assert held - released > 100, (held, released)


def test_the_embedded_store_releases_freed_memory_when_it_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(native_memory, "release_freed_memory", lambda: calls.append("released") or True)
    store = edge_store.EdgeVectorStore(tmp_path / "index")
    store.create_collections(4)
    assert calls == []
    store.close()
    assert calls == ["released"]
