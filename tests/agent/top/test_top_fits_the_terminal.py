"""`gpuwarden top` fits an 80-column terminal (long names are shortened, not wrapped) and
shows every value of a row."""

from __future__ import annotations

from agent.top import render

STATUS = {
    "health": {"policy_digest": "538abf5a5555007b", "ebpf": "on", "nvml": "on", "workloads": 2},
    "rows": [
        {"workload": "ml-train/llm-finetune-distributed-worker-0", "rule": "training+cluster-caps",
         "gpu": "GPU-182b1c6a-0f5e-4a1c-9d2e-1234567890ab", "memory_limit_bytes": 3 << 30,
         "used": {"shim": 2 << 30, "ebpf": 2 << 30, "nvml": (2 << 30) + (300 << 20)},
         "sm_ratio": 0.28, "cores_limit_ratio": 0.3, "agree": True, "last_action": "-"},
        {"workload": "serving/bypass", "rule": "inference", "gpu": "GPU-182b1c6a-0f5e",
         "memory_limit_bytes": 1 << 30, "used": {"shim": 0, "ebpf": 256 << 20, "nvml": None},
         "sm_ratio": None, "cores_limit_ratio": None, "agree": False,
         "last_action": "would_terminate"},
    ],
}


def test_rows_fit_80_columns_with_every_value() -> None:
    text = render(STATUS, width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n" + text
    row = next(line for line in lines if line.startswith("ml-train/"))
    assert "2048/2048/2348" in row and " 3072 " in row and "28%/30%" in row and " yes " in row
    bad = next(line for line in lines if line.startswith("serving/bypass"))
    assert "0/256/-" in bad and " 1024 " in bad and " NO " in bad and "would_t" in bad


def test_a_wide_terminal_shows_the_names_whole() -> None:
    text = render(STATUS, width=200)
    assert "training+cluster-caps" in text and "ml-train/llm-finetune-distributed-worker-0" in text


def test_no_workloads_says_so() -> None:
    assert "(no workloads)" in render({"health": {}, "rows": []})
