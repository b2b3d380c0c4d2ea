"""Audit records -> Events on the pod (reason, and a message with rule and measurement); the
shim's namespace pids -> host pids."""

from agent.cluster import ns_pid
from agent.pods import host_pids, pod_event

UID = "0f7e2c4a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
PODS = {UID: ("ml", "bypasser")}
MIB = 1 << 20


def record(**kw):
    base = {"ts": 1764568800.0, "event": "action", "action": "kill",
            "workload": {"id": f"{UID}_main", "namespace": "ml", "pod": "bypasser",
                         "container": "main"},
            "pids": [4242], "rule": "notebooks", "verdict": "bypass", "gpu_uuid": "GPU-0",
            "evidence": {"shim": 0, "ebpf": 2000 * MIB, "nvml": None}, "limit": 1000 * MIB,
            "detail": "1 process(es) on the GPU without the shim", "reason": "after 0s"}
    base.update(kw)
    return base


def test_a_kill_becomes_a_warning_event_naming_rule_and_measurement():
    ev = pod_event(record(), PODS, "node-1")
    assert ev["type"] == "Warning" and ev["reason"] == "GpuwardenKilled"
    assert ev["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "bypasser",
                                    "namespace": "ml", "uid": UID}
    assert ev["metadata"]["namespace"] == "ml"
    msg = ev["message"]
    assert "rule notebooks" in msg and "bypass violation on GPU-0" in msg
    assert "ebpf 2000 MiB" in msg and "limit 1000 MiB" in msg and "pids 4242" in msg
    assert ev["source"] == {"component": "gpuwarden-agent", "host": "node-1"}
    assert ev["firstTimestamp"] == "2025-12-01T06:00:00Z"


def test_alerts_kernel_kills_and_rule_changes_have_their_reasons():
    assert pod_event(record(event="violation", action="alert"), PODS, "n")["reason"] == \
        "GpuSliceViolation"
    kk = pod_event({"ts": 0, "event": "action", "action": "kernel_kill", "call": "cuMemAlloc",
                    "bytes": 512 * MIB, "limit_bytes": 1000 * MIB, "pids": [7],
                    "workload": {"id": f"{UID}_main", "container": "main"}}, PODS, "n")
    assert kk["reason"] == "GpuwardenKilled" and "inside cuMemAlloc of 512 MiB" in kk["message"]
    rc = pod_event({"ts": 0, "event": "rule_changed", "rule": "r2",
                    "limits_bytes": {"GPU-a": 500 * MIB, "GPU-b": 500 * MIB},
                    "workload": {"id": f"{UID}_main", "container": "main"}}, PODS, "n")
    assert rc["type"] == "Normal" and "memory limit 500 MiB" in rc["message"]
    two = pod_event({"ts": 0, "event": "rule_changed", "rule": "r2",
                     "limits_bytes": {"GPU-a": 500 * MIB, "GPU-b": None},
                     "workload": {"id": f"{UID}_main", "container": "main"}}, PODS, "n")
    assert "memory limit 500 MiB on GPU-a, none on GPU-b" in two["message"]


def test_compute_limits_are_shown_as_ratios():
    ev = pod_event(record(verdict="compute", evidence={"sm_ratio": 0.61}, limit=0.3),
                   PODS, "n")
    assert "sm_ratio 0.61" in ev["message"] and "limit 0.30" in ev["message"]


def test_records_not_about_a_known_pod_make_no_event():
    assert pod_event(record(event="policy_reload"), PODS, "n") is None
    assert pod_event(record(action="arm", event="kernel_kill_limit"), PODS, "n") is None
    assert pod_event(record(workload={"id": "standalone.wl-abc"}), PODS, "n") is None


def test_messages_are_cut_to_what_the_api_server_accepts():
    ev = pod_event(record(detail="x" * 5000), PODS, "n")
    assert len(ev["message"]) == 1024


def test_innermost_namespace_pid_is_read_from_status():
    assert ns_pid("Name:\tpython\nNSpid:\t48211\t7\nNStgid:\t48211\t7\n") == 7
    assert ns_pid("Name:\tpython\nNSpid:\t311\n") == 311
    assert ns_pid("Name:\tx\n") is None


def test_region_pids_of_the_container_namespace_map_to_host_pids_by_start_time():
    region = {7: 1000, 8: 1005, 9: 2000}  # ns pid -> start time as the shim recorded them
    candidates = {48211: (7, 1000), 48300: (8, 9999), 48400: (12, 2000)}
    assert host_pids(region, candidates) == {48211: 1000}
