"""The machine a figure was measured on: CPU model, the instruction sets that change the encoder's speed, cores,
and the dense encoder's backend and precision. Printed beside every timing (demo, index, bench) so figures from
different machines are never compared blind: the same encoder runs ~3x faster with AVX-512 BF16 than AVX2 only."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from rag_pipeline.vectors.dense.base import DenseEncoder, encoder_backend

# The flags that decide which kernels OpenVINO and torch use for the encoder (bf16 needs avx512_bf16 or AMX).
INSTRUCTION_SETS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says; else the machine's count)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores)


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return ""


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's processor string elsewhere)."""
    for line in _cpuinfo().split("\n"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def instruction_sets() -> list[str]:
    """Which of AVX2, AVX-512, VNNI and BF16 (``INSTRUCTION_SETS``) the CPU reports."""
    for line in _cpuinfo().split("\n"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return [f for f in INSTRUCTION_SETS if f in flags]
    return []


def cpu_description() -> str:
    """``model name (instruction sets)``, e.g. ``AMD EPYC 7B13 (avx2)``."""
    return f"{cpu_name()} ({', '.join(instruction_sets()) or 'no AVX2'})"


def machine(encoder: DenseEncoder | None = None) -> dict[str, Any]:
    """CPU model, instruction sets, cores, Python and, given one, the dense encoder's backend and precision."""
    out: dict[str, Any] = {
        "cpu": cpu_name(),
        "instruction_sets": instruction_sets(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }
    if encoder is not None:
        out["dense_encoder"] = f"{encoder.model_id}, {encoder_backend(encoder)}"
    return out


def describe_machine(figures: dict[str, Any]) -> str:
    """One line for a summary: ``AMD EPYC 7B13 (avx2), 2 cores; dense encoder all-MiniLM-L6-v2, openvino (f32)``."""
    line = f"{figures['cpu']} ({', '.join(figures['instruction_sets']) or 'no AVX2'}), {figures['cores']} cores"
    return line + (f"; dense encoder {figures['dense_encoder']}" if figures.get("dense_encoder") else "")
