"""`gpuwarden policy check | fmt | explain | test`.

The only module of the package that reads YAML (pod manifests and test files); everything it
decides is done by the pure modules.  Exit codes: 0 clean, 1 the checked thing is bad, 2 usage.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from policy.diagnostics import Diagnostic

__all__ = ["register"]

TEST_PATTERNS = ("*_test.yaml", "*_test.yml")


def register(subparsers: Any) -> None:
    policy = subparsers.add_parser(
        "policy", help="check, format, explain and test policy files",
        description="The policy toolchain. Exit codes: 0 clean, 1 the input is bad "
        "(errors, failing tests, unformatted files), 2 usage.")
    policy.set_defaults(handler=lambda args: (policy.print_help(), 2)[1])
    sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")

    check = sub.add_parser("check", help="validate policy files (the validator the agent uses)")
    check.add_argument("paths", nargs="+", metavar="PATH", help="policy files or directories")
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.add_argument("--strict", action="store_true", help="warnings fail the check too")
    check.set_defaults(handler=cmd_check)

    fmt = sub.add_parser("fmt", help="print policy files in the canonical layout")
    fmt.add_argument("paths", nargs="+", metavar="PATH",
                     help="policy files, or directories (their *.gwp files, recursively)")
    mode = fmt.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="change nothing; exit 1 and list the files that are not formatted")
    mode.add_argument("-w", "--write", action="store_true", help="rewrite the files in place")
    fmt.add_argument("--diff", action="store_true",
                     help="print a unified diff instead; exit 1 when a file would change")
    fmt.set_defaults(handler=cmd_fmt)

    explain = sub.add_parser(
        "explain", help="effective limits of a pod, and which rule set each",
        description="The effective rule of each container and where each value comes from. "
        "Exit status: 0 every pod is allowed, 1 a pod is DENIED or could not be read (a CI gate "
        "for manifests, as conftest's), 2 usage.")
    explain.add_argument("policy", metavar="POLICY", help="policy file or directory")
    explain.add_argument("pods", nargs="+", metavar="POD.yaml",
                         help="pod manifests as for `kubectl apply` (Pods, or workloads with a "
                         "pod template); `-` reads stdin")
    explain.add_argument("--format", choices=("text", "json"), default="text")
    explain.add_argument("-n", "--namespace", help="namespace when the manifest has none "
                         "(overrides metadata.namespace, like kubectl apply -n)")
    explain.add_argument("--node", default="", help="node name the pod would run on")
    explain.add_argument("--node-label", action="append", default=[], metavar="KEY=VALUE",
                         help="labels of that node (repeatable)")
    explain.add_argument("--resource-name", action="append", default=[], metavar="FIELD=NAME",
                         help="override a resource name, e.g. gpumem=example.com/vram "
                         "(fields: gpu, gpumem, gpumem_percentage, gpucores, priority)")
    explain.add_argument("--all-containers", action="store_true",
                         help="also show containers that ask for no GPU resource")
    explain.add_argument("--exit-zero", action="store_true",
                         help="exit 0 even when a pod is denied (a report, not a gate)")
    explain.set_defaults(handler=cmd_explain)

    alerts = sub.add_parser(
        "alerts", help="Prometheus alert rules named as the policy names its alerts",
        description="Print a Prometheus rule file with one alerting rule per alert name the "
        "policy's on_violation settings give (e.g. TrainingOverGpuSlice); each fires while the "
        "agent counts violations under that name and keeps their severity, policy_rule and "
        "check labels. Load it instead of gpuwarden.rules.yml's GpuwardenPolicyAlert (with "
        "both, each violation alerts twice).")
    alerts.add_argument("policy", metavar="POLICY", help="policy file or directory")
    alerts.add_argument("--window", default="5m", metavar="DURATION",
                        help="how long an alert stays after the last violation (PromQL "
                        "duration; default 5m)")
    alerts.set_defaults(handler=cmd_alerts)

    test = sub.add_parser("test", help="run table-driven policy tests (*_test.yaml)")
    test.add_argument("paths", nargs="+", metavar="PATH",
                      help="test files, or directories searched for *_test.yaml")
    test.add_argument("--policy", action="append", metavar="PATH",
                      help="policy to test (default: each file's `policy:` key)")
    test.add_argument("--format", choices=("text", "json"), default="text")
    test.set_defaults(handler=cmd_test)


def _usage(message: str) -> int:
    print(f"gpuwarden policy: {message}", file=sys.stderr)
    return 2


def _missing(paths: Iterable[str]) -> str | None:
    for p in paths:
        if p != "-" and not Path(p).exists():
            return p
    return None


# ---- check


def cmd_check(args: argparse.Namespace) -> int:
    from policy.loader import load_policy

    missing = _missing(args.paths)
    if missing:
        return _usage(f"check: {missing}: no such file or directory")
    result = load_policy(args.paths)
    errors, warnings = len(result.errors), len(result.warnings)
    failed = errors > 0 or (args.strict and warnings > 0)
    if args.format == "json":
        out = {
            "ok": not failed,
            "digest": result.policy.digest if result.policy else None,
            "files": list(result.files),
            "rules": len(result.policy.rules) if result.policy else None,
            "errors": errors,
            "warnings": warnings,
            "diagnostics": [d.to_json() for d in result.diagnostics],
        }
        print(json.dumps(out, indent=2))
    else:
        _print_diagnostics(result.diagnostics, sys.stdout)
        if result.policy is not None:
            summary = (f"{len(result.files)} files, {len(result.policy.rules)} rules, "
                       f"digest {result.policy.digest[:12]}")
        else:
            summary = f"{len(result.files)} files"
        verdict = "FAILED" if failed else "ok"
        print(f"{verdict}: {summary}; {errors} errors, {warnings} warnings"
              + (" (--strict)" if args.strict and warnings and not errors else ""))
    return 1 if failed else 0


def _policy_has_errors(command: str, path: str, errors: Sequence[Diagnostic]) -> int:
    _print_diagnostics(errors, sys.stderr)
    print(f"{command}: the policy {path} has errors (see above)", file=sys.stderr)
    return 1


def _print_diagnostics(diags: Sequence[Diagnostic], out: TextIO) -> None:
    for d in diags:
        print(d.render(), file=out)
        print(file=out)


# ---- fmt


def _policy_files(paths: Sequence[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        files.extend(sorted(p.rglob("*.gwp")) if p.is_dir() else [p])
    return files


def cmd_fmt(args: argparse.Namespace) -> int:
    from policy.fmt import format_source
    from policy.loader import display_path

    missing = _missing(args.paths)
    if missing:
        return _usage(f"fmt: {missing}: no such file or directory")
    status = 0
    for path in _policy_files(args.paths):
        shown = display_path(path)
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            print(f"{shown}: cannot read: {err}", file=sys.stderr)
            status = 1
            continue
        formatted, diags = format_source(text, shown)
        if formatted is None:
            _print_diagnostics(diags, sys.stderr)
            status = 1
            continue
        changed = formatted != text
        if args.diff:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(keepends=True), formatted.splitlines(keepends=True),
                f"{shown} (original)", f"{shown} (formatted)"))
            if changed:
                status = 1
        elif args.check:
            if changed:
                print(f"would reformat {shown}")
                status = 1
        elif args.write:
            if changed:
                path.write_text(formatted, "utf-8")
                print(f"reformatted {shown}", file=sys.stderr)
        else:
            sys.stdout.write(formatted)
    return status


# ---- YAML (only here)


def _yaml_docs(path: str, with_lines: bool = False) -> list[Any]:
    import yaml

    class LineLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        mapping = loader.construct_mapping(node, deep=True)
        mapping["__line__"] = node.start_mark.line + 1
        return mapping

    LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    text = sys.stdin.read() if path == "-" else Path(path).read_text("utf-8")
    loader = LineLoader if with_lines else yaml.SafeLoader
    try:
        return [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise ValueError(f"{where}: invalid YAML: {getattr(err, 'problem', err)}") from None


# ---- explain


def _resource_names(specs: Sequence[str]) -> Any:
    from gpuwarden.resources import ResourceNames

    values: dict[str, str] = {}
    for spec in specs:
        key, sep, name = spec.partition("=")
        if not sep or key not in ResourceNames.field_names() or not name:
            raise ValueError(f"--resource-name {spec!r}: expected FIELD=NAME with FIELD one of "
                             + ", ".join(ResourceNames.field_names()))
        values[key] = name
    return ResourceNames(**values)


def _node_labels(specs: Sequence[str]) -> dict[str, str]:
    out = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise ValueError(f"--node-label {spec!r}: expected KEY=VALUE")
        out[key] = value
    return out


def cmd_explain(args: argparse.Namespace) -> int:
    from policy.explain import explain_workload, render_explanation
    from policy.loader import load_policy
    from policy.pods import PodError, workloads_from_manifest

    missing = _missing([args.policy, *args.pods])
    if missing:
        return _usage(f"explain: {missing}: no such file or directory")
    try:
        names = _resource_names(args.resource_name)
        node_labels = _node_labels(args.node_label)
    except ValueError as err:
        return _usage(f"explain: {err}")
    result = load_policy([args.policy])
    if result.policy is None:
        return _policy_has_errors("explain", args.policy, result.errors)
    reports: list[dict[str, Any]] = []
    status = 0
    for pod_path in args.pods:
        try:
            docs = _yaml_docs(pod_path)
        except (OSError, ValueError) as err:
            print(f"explain: {err}", file=sys.stderr)
            status = 1
            continue
        if not docs:
            print(f"explain: {pod_path}: holds no Kubernetes object (give a Pod, a workload "
                  "with a pod template, or a List of them, in YAML or JSON)", file=sys.stderr)
            status = 1
            continue
        expanded: list[Any] = []
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind") == "List":
                expanded.extend(doc.get("items") or [])
            else:
                expanded.append(doc)
        for i, doc in enumerate(expanded):
            source = pod_path if len(expanded) == 1 else f"{pod_path}[{i}]"
            try:
                workloads = workloads_from_manifest(
                    doc, source, names, namespace=args.namespace, node_labels=node_labels,
                    gpu_only=not args.all_containers)
            except PodError as err:
                print(f"explain: {err}", file=sys.stderr)
                status = 1
                continue
            pod_report: dict[str, Any] = {"source": source, "containers": []}
            if workloads:
                w0 = workloads[0].workload
                pod_report.update(namespace=w0.namespace, name=w0.name)
            else:
                meta = doc.get("metadata") or {}
                pod_report.update(namespace=args.namespace or meta.get("namespace") or "default",
                                  name=meta.get("name", ""))
            for pw in workloads:
                w = pw.workload
                if args.node:
                    from dataclasses import replace

                    w = replace(w, node=args.node)
                pod_report["containers"].append(
                    explain_workload(result.policy, w, init=pw.init, uses_gpu=pw.uses_gpu))
            reports.append(pod_report)
    denied = [f"{r.get('namespace')}/{r.get('name')}" for r in reports
              if any(not c.get("allowed", True) for c in r["containers"])]
    if args.format == "json":
        print(json.dumps({"policy": args.policy, "digest": result.policy.digest,
                          "pods": reports}, indent=2))
    else:
        print(render_explanation(reports, result.policy.digest), end="")
    if denied:
        print(f"explain: denied by the policy: {', '.join(denied)}"
              + (" (--exit-zero)" if args.exit_zero else ""), file=sys.stderr)
        if not args.exit_zero:
            status = 1
    return status


# ---- alerts


def cmd_alerts(args: argparse.Namespace) -> int:
    import re

    import yaml

    from policy.alerts import alert_rules
    from policy.loader import load_policy

    if _missing([args.policy]):
        return _usage(f"alerts: {args.policy}: no such file or directory")
    if not re.fullmatch(r"([0-9]+(ms|s|m|h|d|w|y))+", args.window):
        return _usage(f"alerts: --window {args.window!r} is not a PromQL duration (e.g. 5m, 1h)")
    result = load_policy([args.policy])
    if result.policy is None:
        return _policy_has_errors("alerts", args.policy, result.errors)
    print(f"# Generated by `gpuwarden policy alerts {args.policy}`;\n"
          "# regenerate it when the policy's alert names change.")
    print(yaml.safe_dump(alert_rules(result.policy, window=args.window), sort_keys=False,
                         width=100), end="")
    return 0


# ---- test


def _test_files(paths: Sequence[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted({f for pat in TEST_PATTERNS for f in p.rglob(pat)})
            files.extend(found)
        else:
            files.append(p)
    return files


def cmd_test(args: argparse.Namespace) -> int:
    from policy.loader import display_path, load_policy
    from policy.testing import SuiteError, run_suite

    missing = _missing([*args.paths, *(args.policy or [])])
    if missing:
        return _usage(f"test: {missing}: no such file or directory")
    files = _test_files(args.paths)
    if not files:
        return _usage("test: no test files (*_test.yaml) found in " + " ".join(args.paths))
    total = failed = 0
    report: list[dict[str, Any]] = []
    status = 0
    for path in files:
        shown = display_path(path)
        entry: dict[str, Any] = {"file": shown, "error": None, "cases": []}
        report.append(entry)
        try:
            docs = _yaml_docs(str(path), with_lines=True)
            if len(docs) != 1:
                raise SuiteError(f"{shown}: a test file holds exactly one YAML document")
            doc = docs[0]
            policy_paths = list(args.policy or [])
            if not policy_paths:
                raw = doc.get("policy") if isinstance(doc, dict) else None
                raws = raw if isinstance(raw, list) else [raw] if raw else []
                if not raws or not all(isinstance(r, str) for r in raws):
                    raise SuiteError(f"{shown}: no `policy:` (a path relative to the test "
                                     "file, or a list) and no --policy given")
                policy_paths = [str(path.parent / r) for r in raws]
                gone = _missing(policy_paths)
                if gone:
                    raise SuiteError(f"{shown}: policy {display_path(Path(gone))} not found")
            result = load_policy(policy_paths)
            if result.policy is None:
                _print_diagnostics(result.errors, sys.stderr)
                raise SuiteError(f"{shown}: the policy under test has errors (see above)")
            _resolve_pod_files(doc, path)
            cases = run_suite(doc, result.policy, shown)
        except (SuiteError, OSError, ValueError) as err:
            entry["error"] = str(err)
            status = 1
            continue
        for case in cases:
            total += 1
            failed += not case.passed
            entry["cases"].append({"name": case.name, "line": case.line,
                                   "passed": case.passed, "failures": case.failures})
    if failed:
        status = 1
    if args.format == "json":
        print(json.dumps({"ok": status == 0, "tests": total, "failed": failed,
                          "files": report}, indent=2))
        return status
    for entry in report:
        print(f"Unit Testing: {entry['file']}")
        if entry["error"]:
            print(f"  ERROR: {entry['error']}\n")
            continue
        bad = [c for c in entry["cases"] if not c["passed"]]
        if not bad:
            print(f"  SUCCESS ({len(entry['cases'])} tests)\n")
            continue
        print("  FAILED:")
        for c in bad:
            where = f"{entry['file']}:{c['line']}" if c["line"] else entry["file"]
            print(f"    {where}: test {c['name']!r}")
            for f in c["failures"]:
                print(f"        {f}")
        print()
    errors = sum(1 for e in report if e["error"])
    print(f"{total - failed} passed, {failed} failed"
          + (f", {errors} test files with errors" if errors else ""))
    return status


def _resolve_pod_files(doc: Any, test_path: Path) -> None:
    """`pod_file: ../pods/x.yaml` in a case -> `pod: <manifest>` (first document)."""
    if not isinstance(doc, dict):
        return
    for case in doc.get("tests") or []:
        if isinstance(case, dict) and "pod_file" in case:
            ref = case.pop("pod_file")
            if "pod" in case:
                raise ValueError(f"{test_path}:{case.get('__line__')}: give `pod` or `pod_file`")
            docs = _yaml_docs(str(test_path.parent / str(ref)))
            if not docs:
                raise ValueError(f"{test_path}: pod_file {ref} is empty")
            case["pod"] = docs[0]
