"""Host facts, as the measurement scripts print them in their first line."""

from __future__ import annotations

from a3c.host import available_cores, cpu_model, describe_host, native_bfloat16


def test_the_host_line_names_the_cpu_its_cores_and_its_bfloat16() -> None:
    line = describe_host()
    assert line.startswith(f"CPU: {cpu_model()}, {available_cores()} cores, ")
    assert cpu_model() and cpu_model() != "unknown CPU"
    assert line.endswith("native bfloat16") == native_bfloat16()
