"""Facts about the machine a3c runs on: its cores and its bfloat16 arithmetic."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def native_bfloat16() -> bool:
    """Whether this CPU computes in bfloat16 natively (AVX512-BF16 or AMX tiles).

    There oneDNN's bfloat16 convolutions beat float32 ones (docs/throughput.md); elsewhere
    oneDNN emulates bfloat16, which is not measured here, so float32 is kept. torch asks
    the CPU through private functions: a torch without them (or on another architecture)
    answers False, and frames stay float32.
    """
    import torch  # here: the command-line parsers read available_cores without torch

    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, check, lambda: False)() for check in checks)


def bfloat16_frames(precision: str) -> bool:
    """Whether `--precision` puts a conv encoder in bfloat16 on this machine."""
    return precision == "bfloat16" or (precision == "auto" and native_bfloat16())


def cpu_model() -> str:
    """The CPU's model name, as the kernel reports it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_host() -> str:
    """One line for the head of a measurement: what it ran on, and what moves a3c's speed."""
    bfloat16 = "native bfloat16" if native_bfloat16() else "no native bfloat16 (frames in float32)"
    return f"CPU: {cpu_model()}, {available_cores()} cores, {bfloat16}"
