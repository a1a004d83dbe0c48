"""`yuniplace validate FILE…`: check manifests' gang annotations, and queue configurations, before
anything runs.

Finds every pod a manifest will create (Pods; the pod templates of Jobs, CronJobs, Deployments,
StatefulSets, ReplicaSets, DaemonSets; the driver and executor of a Kubeflow SparkApplication; the head,
workers and submitter KubeRay's operator creates for a RayCluster or RayJob, and what its gang will be; the
`spark.kubernetes.*.annotation.*` settings of spark-submit properties files, scripts and `--conf`
files), applies the webhook's own checks, and compares each gang member's requests with its task
group's minResource — the most common gang scheduling mistake is a Spark pod whose memory overhead
was left out of minResource. Lines of Spark settings that spark-submit would misread are errors
naming the line. Queue configurations (YuniKorn's queues.yaml, a ConfigMap holding one, Volcano's
Queues) are checked as the controller reads them (yuniplace.tools.queuefiles). Pods of Kubernetes' own
gangs are read with the PodGroups or Workloads the files describe, as the controller will hold them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from yuniplace.devices.claims import UnsupportedClaim, pod_claims, requests_of
from yuniplace.devices.inventory import DeviceClass
from yuniplace.devices.selectors import SelectorError, compile_selector
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application, read_gang
from yuniplace.gang.dialects.registry import dialect_of
from yuniplace.gang.resources import (
    format_quantity,
    pod_requests,
    quantities,
    shortfalls,
)
from yuniplace.gang.taskgroups import GangSpec, Limits
from yuniplace.kube import workloadapi
from yuniplace.tools import queuefiles, rayobjects, sparkconf
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
SPARK_SETTINGS = (".conf", ".sh", ".properties", ".txt")
DRA_KINDS = {"DeviceClass": "classes", "ResourceClaimTemplate": "templates", "ResourceClaim": "claims"}


@dataclass
class Subject:
    """One pod a manifest will create, as far as gang scheduling is concerned."""

    where: str
    pod: dict[str, Any]
    findings: list[tuple[str, str]] = field(default_factory=list)  # (error|warning|gang, message)


def _dig(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = document
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _spark_role_pod(name: str, role: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    factor = float(spec.get("memoryOverheadFactor") or (0.4 if spec.get("type") in ("Python", "R") else 0.1))
    requests: dict[str, str] = {}
    cores = role.get("coreRequest") or role.get("cores")
    if cores:
        requests["cpu"] = str(cores)
    memory = sparkconf.pod_memory(role.get("memory"), role.get("memoryOverhead"), factor)
    if memory:
        requests["memory"] = memory
    return {
        "metadata": {
            "name": name,
            "labels": dict(role.get("labels") or {}),
            "annotations": dict(role.get("annotations") or {}),
        },
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
    elif rayobjects.is_ray_object(document):
        summary, warnings = rayobjects.gang_summary(document)
        for index, (what, pod) in enumerate(rayobjects.ray_pods(document)):
            subject = Subject(f"{where} {kind}/{name} {what}", pod)
            if index == 0:
                subject.findings += [("gang", summary), *(("warning", warning) for warning in warnings)]
            yield subject
    elif kind == "SparkApplication":
        spec = document.get("spec") or {}
        app = {"spark-app-selector": str(name)}  # the operator's app label, for grouping
        for role in ("driver", "executor"):
            pod = _spark_role_pod(f"{name}-{role}", spec.get(role) or {}, spec)
            pod["metadata"]["labels"] = {**app, **pod["metadata"]["labels"]}
            yield Subject(f"{where} SparkApplication/{name} {role}", pod)


def subjects_of_spark_conf(conf: sparkconf.SparkConf, where: str) -> Iterator[Subject]:
    """The driver and executor pods spark-submit makes of `spark.kubernetes.{driver,executor}.*` settings."""
    roles: dict[str, dict[str, Any]] = {}
    for setting in conf.settings:
        match = sparkconf.ROLE_METADATA.match(setting.key)
        if match:
            role, kind, name = match.groups()
            pod = roles.setdefault(
                role, {"metadata": {"name": role, "labels": {"spark-app-selector": where}, "annotations": {}}}
            )
            pod["metadata"]["annotations" if kind == "annotation" else "labels"][name] = setting.value
    for role, pod in roles.items():
        cores = conf.get(f"spark.kubernetes.{role}.request.cores") or conf.get(f"spark.{role}.cores")
        sized = _spark_role_pod(
            role,
            {
                "cores": cores,
                "memory": conf.get(f"spark.{role}.memory"),
                "memoryOverhead": conf.get(f"spark.{role}.memoryOverhead"),
            },
            {
                "memoryOverheadFactor": conf.get(f"spark.{role}.memoryOverheadFactor")
                or conf.get("spark.kubernetes.memoryOverheadFactor")
            },
        )
        pod["spec"] = sized["spec"]
        yield Subject(f"{where} spark-submit {role}", pod)


@dataclass
class Loaded:
    """What one file holds: the pods it describes, the problems found in reading it ((where, message)
    each), its queue configurations checked, and the native pod groups it describes (the Workload API's
    PodGroups and Workloads, by the name their pods give them)."""

    subjects: list[Subject] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    queues: queuefiles.QueueCheck = field(default_factory=queuefiles.QueueCheck)
    native_groups: dict[str, workloadapi.NativeGroup] = field(default_factory=dict)
    dra: DraObjects = field(default_factory=lambda: DraObjects())


@dataclass
class DraObjects:
    """The DRA objects the files describe, by name: what gang members' claims name is checked against them."""

    classes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    templates: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    claims: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def take(self, document: Mapping[str, Any]) -> bool:
        """Keep the document if it is a DRA object; whether it was."""
        where = DRA_KINDS.get(str(document.get("kind")))
        if where is None or not str(document.get("apiVersion", "")).startswith("resource.k8s.io/"):
            return False
        getattr(self, where)[str(_dig(document, ("metadata", "name")))] = document
        return True

    def update(self, other: DraObjects) -> None:
        self.classes.update(other.classes)
        self.templates.update(other.templates)
        self.claims.update(other.claims)


def load_subjects(path: Path) -> Loaded:
    text = path.read_text()
    if path.suffix in SPARK_SETTINGS:
        conf = sparkconf.read(text, path.suffix)
        problems = [(f"{path}:{line}", message) for line, message in sorted(conf.problems)]
        return Loaded(list(subjects_of_spark_conf(conf, str(path))), problems)
    loaded = Loaded()
    documents = list(yaml.safe_load_all(text))
    for index, document in enumerate(documents):
        if not isinstance(document, Mapping):
            continue
        if workloadapi.version_named(str(document.get("apiVersion"))) is not None:
            if not all(isinstance(document.get(part) or {}, Mapping) for part in ("metadata", "spec")):
                loaded.problems.append((f"{path}#{index}", "a Workload API object whose metadata or spec is no map"))
                continue
            loaded.native_groups.update((group.name, group) for group in workloadapi.groups_described(document))
        elif not loaded.dra.take(document):
            loaded.subjects += subjects_of(document, f"{path}#{index}")
    loaded.queues = queuefiles.check(documents, text, str(path))
    return loaded


def check(
    subjects: list[Subject],
    limits: Limits,
    native_groups: Mapping[str, workloadapi.NativeGroup],
    dra: DraObjects | None = None,
) -> None:
    """Record each subject's findings: the webhook's errors, members larger than their group, what a
    native gang (the Workload API) will be, and DRA claims a gang member uses that yuniplace cannot count."""
    by_app: dict[str | None, list[Subject]] = defaultdict(list)
    for subject in subjects:
        problem = problems_of(subject.pod, limits)
        if problem:
            subject.findings.append(("error", problem))
        if is_gang_pod(subject.pod, hold_native=True):
            _check_devices(subject, dra or DraObjects())
        by_app[p.app_id(subject.pod)].append(subject)
    for app_id, members in by_app.items():
        dialect = dialect_of(members[0].pod)
        if app_id is not None and dialect is not None and dialect.started_by_kube_scheduler:
            _check_native(app_id, members, native_groups, limits)
            continue
        app = Application.of(p.AppKey("", app_id or ""), [s.pod for s in members], limits=limits)
        if app.originator is None or app.spec is None:
            continue
        # The groups as written, not as yuniplace makes them to hold the members there are at the start.
        declared = read_gang(app.originator, app.pod_group, limits, app.members)
        for subject in members:
            _check_member(subject, declared)


def _check_native(
    name: str, members: list[Subject], groups: Mapping[str, workloadapi.NativeGroup], limits: Limits
) -> None:
    """A native gang as yuniplace will hold it: its group's minimum and its members' shapes, its queue and
    the timeout its group's object states; or why its group cannot be read."""
    first = members[0]
    group = workloadapi.lookup(groups, name)
    if group is None:
        first.findings.append(
            (
                "warning",
                f"names pod group {name} of the Workload API, which these files do not describe: kube-scheduler "
                "keeps its pods unschedulable until it exists",
            )
        )
        return
    app = Application.of(p.AppKey("", name), [s.pod for s in members], group.as_object(), limits)
    if app.spec is None:
        first.findings.append(("error", f"{group.described_by}: {app.problem}"))
        return
    spec = app.spec
    sizes = ", ".join(
        f"{g.min_member} × ({', '.join(f'{k} {v}' for k, v in sorted(g.min_resource.items()))})" for g in spec.groups
    )
    first.findings.append(
        (
            "gang",
            f"{spec.min_members} pods, all or nothing: {sizes}, Kubernetes' own ({group.described_by}): "
            f"yuniplace holds it for queue {app.queue} (timeout {spec.policy.timeout_s}s, "
            f"{spec.policy.on_timeout.value}), then {spec.starts_when_all_exist} binds it",
        )
    )


def _check_devices(subject: Subject, dra: DraObjects) -> None:
    """What a gang member's DRA claims ask, as admission will count it: a template, claim or device class
    these files do not describe must exist in the cluster first (warning: until it does, the gang waits),
    a request admission cannot count (firstAvailable) and a CEL selector yuniplace cannot evaluate are
    errors (the gang would wait for good)."""
    for entry in pod_claims(subject.pod):
        kind, name, found = (
            ("ResourceClaimTemplate", entry.template, dra.templates.get(str(entry.template)))
            if entry.template is not None
            else ("ResourceClaim", entry.claim, dra.claims.get(str(entry.claim)))
        )
        if found is None:
            subject.findings.append(
                (
                    "warning",
                    f"claim {entry.name} uses {kind} {name}, which these files do not describe: it must exist in "
                    "the pod's namespace, or the gang waits for it (GangDevices)",
                )
            )
            continue
        spec = _dig(found, ("spec", "spec") if entry.template is not None else ("spec",)) or {}
        try:
            requests = requests_of(spec)
        except UnsupportedClaim as unsupported:
            subject.findings.append(("error", f"claim {entry.name} ({kind} {name}): {unsupported}"))
            continue
        for request in requests:
            described = dra.classes.get(request.kind.device_class)
            if described is None:
                subject.findings.append(
                    (
                        "warning",
                        f"claim {entry.name} ({kind} {name}) asks devices of DeviceClass {request.kind.device_class}, "
                        "which these files do not describe: it must exist in the cluster (a DRA driver installs it)",
                    )
                )
            class_selectors = DeviceClass.of(described).selectors if described is not None else ()
            for expression in (*request.kind.selectors, *class_selectors):
                try:
                    compile_selector(expression)
                except SelectorError as error:
                    subject.findings.append(
                        (
                            "error",
                            f"claim {entry.name} ({kind} {name}): yuniplace cannot evaluate the selector "
                            f"{expression!r} ({error}), so it cannot count these devices: the gang would wait",
                        )
                    )


def _check_member(subject: Subject, spec: GangSpec) -> None:
    group_name = p.task_group_name(subject.pod)
    if not is_gang_pod(subject.pod) or group_name is None:
        return
    group = spec.group(group_name)
    if group is None:
        if not p.carries_task_groups(subject.pod):
            names = ", ".join(g.name for g in spec.groups)
            subject.findings.append(
                (
                    "error",
                    f'{keys.TASK_GROUP_NAME}: "{group_name}" is not a task group of this application (groups: {names})',
                )
            )
        return
    short = shortfalls(pod_requests(subject.pod.get("spec") or {}), quantities(group.min_resource))
    if short:
        detail = ", ".join(f"{n} {format_quantity(a)} > {format_quantity(b)}" for n, a, b in short)
        subject.findings.append(
            (
                "warning",
                f"requests more than task group {group_name}'s minResource ({detail}): yuniplace reserves it "
                "its own size if it exists when the gang starts, but coming later (a Spark executor) it will not "
                "fit its placeholder's room and will be scheduled normally (a pod requests its largest init "
                "container too, and a Spark pod its memory overhead: include them in minResource)",
            )
        )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "validate",
        help="check manifests' gang annotations offline",
        description="Check the gang annotations of every pod the given manifests create (Pods, workload "
        "templates, SparkApplications, spark-submit properties files, scripts and --conf files), and queue "
        "configurations (YuniKorn's queues.yaml, a ConfigMap holding one, Volcano Queues). Lines that "
        "spark-submit would misread are errors. Exit 1 on any error (or warning, with --strict).",
    )
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE")
    parser.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a file to check, as kubectl names one (repeatable; beside the FILEs)",
    )
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    parser.add_argument("--output", "-o", choices=["text", "json"], default="text")
    parser.set_defaults(run=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    args.files = [*args.files, *args.filenames]
    if not args.files:
        args.parser.error("name at least one FILE (or -f FILE)")
    limits = Limits()
    subjects: list[Subject] = []
    unreadable: list[tuple[str, str]] = []  # (where, message): files and lines that cannot be used
    queues = queuefiles.QueueCheck()
    native_groups: dict[str, workloadapi.NativeGroup] = {}
    dra = DraObjects()
    for path in args.files:
        try:
            loaded = load_subjects(path)
        except (OSError, yaml.YAMLError, ValueError) as error:
            unreadable.append((str(path), f"cannot read: {error}"))
            continue
        except RecursionError:
            unreadable.append((str(path), "cannot read: nested too deeply"))
            continue
        subjects += loaded.subjects
        native_groups.update(loaded.native_groups)
        dra.update(loaded.dra)
        unreadable += loaded.problems + loaded.queues.errors
        queues.configurations += loaded.queues.configurations
        queues.queues += loaded.queues.queues
        queues.warnings += loaded.queues.warnings
    check(subjects, limits, native_groups, dra)
    gang = [s for s in subjects if is_gang_pod(s.pod, hold_native=True)]
    errors = len(unreadable) + sum(1 for s in subjects for level, _ in s.findings if level == "error")
    warnings = len(queues.warnings) + sum(1 for s in subjects for level, _ in s.findings if level == "warning")
    if args.output == "json":
        json.dump(
            {
                "files": [str(f) for f in args.files],
                "gang_pods": len(gang),
                "queues": queues.queues,
                "errors": errors,
                "warnings": warnings,
                "findings": [{"where": w, "level": "error", "message": m} for w, m in unreadable]
                + [{"where": w, "level": "warning", "message": m} for w, m in queues.warnings]
                + [{"where": s.where, "level": lv, "message": m} for s in subjects for lv, m in s.findings],
            },
            sys.stdout,
            indent=2,
        )
        print()
    else:
        for where, message in unreadable:
            print(f"{where}: error: {message}")
        for where, message in queues.warnings:
            print(f"{where}: warning: {message}")
        for subject in subjects:
            for level, message in subject.findings:
                print(f"{subject.where}: {level}: {message}")
        verdict = "FAIL" if errors or (args.strict and warnings) else "ok"
        counted = f", {queues.queues} queue(s)" if queues.configurations else ""
        print(
            f"{verdict}: {len(args.files)} file(s), {len(gang)} gang pod(s), {errors} error(s), {warnings} warning(s)"
            + counted
        )
    return 1 if errors or (args.strict and warnings) else 0
