"""`yuniplace validate FILE…`: check manifests' gang annotations before anything runs.

Finds every pod a manifest will create (Pods; the pod templates of Jobs, CronJobs, Deployments,
StatefulSets, ReplicaSets, DaemonSets; the driver and executor of a Kubeflow SparkApplication;
`--conf spark.kubernetes.*.annotation.*` lines of spark-submit), applies the webhook's own checks, and
compares each gang member's requests with its task group's minResource — the most common gang
scheduling mistake is a Spark pod whose memory overhead was left out of minResource.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.resources import format_quantity, pod_requests, quantities, shortfalls
from yuniplace.gang.taskgroups import InvalidGang, Limits, parse_gang
from yuniplace.webhook.admission import is_gang_pod, problems_of

MIB = 1024 * 1024
TEMPLATE_PATHS = {
    "Job": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
SPARK_CONF = re.compile(r"spark\.kubernetes\.(driver|executor)\.(annotation|label)\.(\S+?)=(.*)$")


@dataclass
class Subject:
    """One pod a manifest will create, as far as gang scheduling is concerned."""

    where: str
    pod: dict[str, Any]
    findings: list[tuple[str, str]] = field(default_factory=list)  # (error|warning, message)


def _dig(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = document
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _spark_memory(memory: str | None, overhead: str | None, factor: float) -> str | None:
    """Spark's pod memory: the JVM memory plus max(384Mi, factor × memory), unless given."""
    if not memory:
        return None
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    match = re.fullmatch(r"(\d+)([kmgt]?)b?", memory.strip().lower())
    if not match:
        return None
    mib = int(match.group(1)) * units.get(match.group(2) or "m", 1)
    if overhead:
        extra = re.fullmatch(r"(\d+)([kmgt]?)b?", overhead.strip().lower())
        extra_mib = int(extra.group(1)) * units.get(extra.group(2) or "m", 1) if extra else 0
    else:
        extra_mib = max(384, math.floor(mib * factor))
    return f"{int(mib + extra_mib)}Mi"


def _spark_role_pod(name: str, role: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    factor = float(spec.get("memoryOverheadFactor") or (0.4 if spec.get("type") in ("Python", "R") else 0.1))
    requests: dict[str, str] = {}
    cores = role.get("coreRequest") or role.get("cores")
    if cores:
        requests["cpu"] = str(cores)
    memory = _spark_memory(role.get("memory"), role.get("memoryOverhead"), factor)
    if memory:
        requests["memory"] = memory
    return {
        "metadata": {"name": name, "labels": dict(role.get("labels") or {}), "annotations": dict(role.get("annotations") or {})},
        "spec": {"containers": [{"name": "spark", "resources": {"requests": requests}}]},
    }


def subjects_of(document: Mapping[str, Any], where: str) -> Iterator[Subject]:
    kind = document.get("kind")
    name = _dig(document, ("metadata", "name")) or "?"
    if kind == "Pod" and name == "?":
        # A pod template file (spark.kubernetes.*.podTemplateFile): Spark adds the name and the
        # application label at submit time, so templates checked together form one application.
        pod = {**document, "metadata": {**(document.get("metadata") or {})}}
        pod["metadata"]["labels"] = {"spark-app-selector": "(pod templates)", **(pod["metadata"].get("labels") or {})}
        yield Subject(f"{where} pod template", pod)
    elif kind == "Pod":
        yield Subject(f"{where} Pod/{name}", dict(document))
    elif kind == "List":
        for index, item in enumerate(document.get("items") or []):
            if isinstance(item, Mapping):
                yield from subjects_of(item, f"{where}[{index}]")
    elif kind in TEMPLATE_PATHS:
        template = _dig(document, TEMPLATE_PATHS[kind])
        if isinstance(template, Mapping):
            pod = {"metadata": {"name": name, **(template.get("metadata") or {})}, "spec": template.get("spec") or {}}
            yield Subject(f"{where} {kind}/{name} pod template", pod)
    elif kind == "SparkApplication":
        spec = document.get("spec") or {}
        app = {"spark-app-selector": str(name)}  # the operator's app label, for grouping
        for role in ("driver", "executor"):
            pod = _spark_role_pod(f"{name}-{role}", spec.get(role) or {}, spec)
            pod["metadata"]["labels"] = {**app, **pod["metadata"]["labels"]}
            yield Subject(f"{where} SparkApplication/{name} {role}", pod)


def subjects_of_spark_conf(text: str, where: str) -> Iterator[Subject]:
    """spark-submit `--conf k=v` options (one file may hold a whole command line)."""
    conf: dict[str, str] = {}
    roles: dict[str, dict[str, Any]] = {}
    for token in shlex.split(text, comments=True):
        key, sep, value = token.partition("=")
        if sep and key.startswith("spark."):
            conf[key] = value
        match = SPARK_CONF.match(token)
        if match:
            role, kind, name, value = match.groups()
            pod = roles.setdefault(role, {"metadata": {"name": role, "labels": {"spark-app-selector": where}, "annotations": {}}})
            pod["metadata"]["annotations" if kind == "annotation" else "labels"][name] = value
    for role, pod in roles.items():
        sized = _spark_role_pod(role, {"cores": conf.get(f"spark.{role}.cores"), "memory": conf.get(f"spark.{role}.memory"),
                                       "memoryOverhead": conf.get(f"spark.{role}.memoryOverhead")},
                                {"memoryOverheadFactor": conf.get("spark.kubernetes.memoryOverheadFactor")})
        pod["spec"] = sized["spec"]
        yield Subject(f"{where} spark-submit {role}", pod)


def load_subjects(path: Path) -> list[Subject]:
    text = path.read_text()
    if path.suffix in (".conf", ".sh", ".properties", ".txt"):
        return list(subjects_of_spark_conf(text, str(path)))
    subjects = []
    for index, document in enumerate(yaml.safe_load_all(text)):
        if isinstance(document, Mapping):
            subjects += subjects_of(document, f"{path}#{index}")
    return subjects


def check(subjects: list[Subject], limits: Limits) -> None:
    """Record each subject's findings: the webhook's errors, and members larger than their group."""
    groups_by_app: dict[str | None, Any] = {}
    for subject in subjects:
        problem = problems_of(subject.pod, limits)
        if problem:
            subject.findings.append(("error", problem))
        if keys.TASK_GROUPS in p.annotations(subject.pod):
            try:
                groups_by_app[p.app_id(subject.pod)] = parse_gang(p.annotations(subject.pod), limits)
            except InvalidGang:
                pass
    for subject in subjects:
        group_name = p.task_group_name(subject.pod)
        spec = groups_by_app.get(p.app_id(subject.pod))
        if not is_gang_pod(subject.pod) or group_name is None or spec is None:
            continue
        if spec.group(group_name) is None and keys.TASK_GROUPS not in p.annotations(subject.pod):
            names = ", ".join(g.name for g in spec.groups)
            subject.findings.append(("error", f'{keys.TASK_GROUP_NAME}: "{group_name}" is not a task group of this application (groups: {names})'))
            continue
        if spec.group(group_name) is None:
            continue
        needed = pod_requests(subject.pod.get("spec") or {})
        room: dict[str, Decimal] = quantities(spec.group(group_name).min_resource)
        short = shortfalls(needed, room)
        if short:
            detail = ", ".join(f"{n} {format_quantity(a)} > {format_quantity(b)}" for n, a, b in short)
            subject.findings.append(
                ("warning", f"requests more than task group {group_name}'s minResource ({detail}): it will not fit its "
                            "placeholder's room and will be scheduled normally (include Spark's memory overhead in minResource)")
            )


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "validate",
        help="check manifests' gang annotations offline",
        description="Check the gang annotations of every pod the given manifests create (Pods, workload "
        "templates, SparkApplications, spark-submit --conf files). Exit 1 on any error (or warning, with --strict).",
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    parser.add_argument("--output", "-o", choices=["text", "json"], default="text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    limits = Limits()
    subjects: list[Subject] = []
    unreadable: list[tuple[str, str]] = []
    for path in args.files:
        try:
            subjects += load_subjects(path)
        except (OSError, yaml.YAMLError, ValueError) as error:
            unreadable.append((str(path), f"cannot read: {error}"))
    check(subjects, limits)
    gang = [s for s in subjects if is_gang_pod(s.pod)]
    errors = len(unreadable) + sum(1 for s in subjects for level, _ in s.findings if level == "error")
    warnings = sum(1 for s in subjects for level, _ in s.findings if level == "warning")
    if args.output == "json":
        json.dump(
            {
                "files": [str(f) for f in args.files],
                "gang_pods": len(gang),
                "errors": errors,
                "warnings": warnings,
                "findings": [{"where": w, "level": "error", "message": m} for w, m in unreadable]
                + [{"where": s.where, "level": lv, "message": m} for s in subjects for lv, m in s.findings],
            },
            sys.stdout,
            indent=2,
        )
        print()
    else:
        for where, message in unreadable:
            print(f"{where}: error: {message}")
        for subject in subjects:
            for level, message in subject.findings:
                print(f"{subject.where}: {level}: {message}")
        verdict = "FAIL" if errors or (args.strict and warnings) else "ok"
        print(f"{verdict}: {len(args.files)} file(s), {len(gang)} gang pod(s), {errors} error(s), {warnings} warning(s)")
    return 1 if errors or (args.strict and warnings) else 0
