"""The Grafana dashboard the chart ships (charts/yuniplace/dashboards/yuniplace.json): it has the shape
Grafana loads, and every query reads only metrics, labels and label values the controller exports, so a
renamed metric or label cannot leave a panel silently empty.

No Grafana dashboard schema or PromQL parser is among the project's dependencies, so the shape is checked
here for what Grafana needs to load and lay the dashboard out, and the queries are read by a small PromQL
reader that refuses what it does not know rather than guessing."""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from yuniplace.runtime.events import NORMAL, WARNING, Reason
from yuniplace.runtime.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "charts" / "yuniplace" / "dashboards" / "yuniplace.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GRID_WIDTH = 24
PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "bargauge", "table", "text", "heatmap", "piechart"}
# Labels Prometheus gives every scraped series, whatever the target exports.
TARGET_LABELS = frozenset({"job", "instance"})

AGGREGATIONS = frozenset(
    {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}
)
FUNCTIONS = AGGREGATIONS | {
    "abs",
    "absent",
    "absent_over_time",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "count_over_time",
    "delta",
    "deriv",
    "exp",
    "floor",
    "histogram_quantile",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "max_over_time",
    "min_over_time",
    "predict_linear",
    "quantile_over_time",
    "rate",
    "resets",
    "round",
    "scalar",
    "sort",
    "sort_desc",
    "sum_over_time",
    "time",
    "timestamp",
    "vector",
}
# Keywords that take a list of label names: `sum by (queue) (...)`, `a / on (queue) group_left b`.
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
BINARY_KEYWORDS = frozenset({"and", "or", "unless", "bool"})
MATCH_OPERATORS = frozenset({"=", "!=", "=~", "!~"})

TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    |(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    |(?P<range>\[[^\]]*\])
    |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^(){},=<>])
    """,
    re.VERBOSE,
)
RANGE = re.compile(r"\[(?:\$__rate_interval|\$__interval|\$__range|\d+[smhdwy])\]")
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")


# -- the PromQL reader --------------------------------------------------------------------------------


@dataclass
class Selector:
    metric: str
    matchers: list[tuple[str, str, str]] = field(default_factory=list)  # label, operator, value


@dataclass
class Query:
    selectors: list[Selector] = field(default_factory=list)
    grouping: set[str] = field(default_factory=set)  # label names named by by/without/on/ignoring/group_*
    aggregated: bool = False  # an aggregation keeps only the labels it groups by


def tokens(expr: str) -> list[tuple[str, str]]:
    """(kind, text) of every token but spaces; anything the reader does not know is an error, so a
    query it cannot read fails the test instead of being skipped."""
    found: list[tuple[str, str]] = []
    position = 0
    while position < len(expr):
        match = TOKEN.match(expr, position)
        if match is None:
            raise ValueError(f"cannot read {expr[position:]!r} in {expr!r}")
        assert match.lastgroup is not None
        if match.lastgroup == "range" and not RANGE.fullmatch(match.group()):
            raise ValueError(f"range {match.group()} is neither a duration nor a Grafana interval, in {expr!r}")
        if match.lastgroup != "space":
            found.append((match.lastgroup, match.group()))
        position = match.end()
    return found


def read(expr: str) -> Query:
    """The selectors and grouping labels of a PromQL expression. An identifier is a function or an
    aggregation when followed by `(` (or, for an aggregation, by `by`/`without`), a keyword, or else a
    metric name; `{...}` after a metric name holds its label matchers."""
    toks, query, i = tokens(expr), Query(), 0

    def at(index: int) -> str:
        return toks[index][1] if index < len(toks) else ""

    while i < len(toks):
        kind, text = toks[i]
        if kind != "ident":
            if text == "{":
                raise ValueError(f"a selector without a metric name in {expr!r}")
            i += 1
        elif text in GROUPING:
            i += 1
            if at(i) == "(":
                close = next((j for j in range(i, len(toks)) if toks[j][1] == ")"), None)
                if close is None:
                    raise ValueError(f"{text} ( is not closed in {expr!r}")
                for listed_kind, name in toks[i + 1 : close]:
                    if listed_kind == "ident":
                        query.grouping.add(name)
                    elif name != ",":
                        raise ValueError(f"{text} (...) lists {name!r}, not a label name, in {expr!r}")
                i = close + 1
            elif text in ("by", "without", "on", "ignoring"):
                raise ValueError(f"{text} without its label list in {expr!r}")
        elif text in BINARY_KEYWORDS:
            i += 1
        elif at(i + 1) == "(" or (text in AGGREGATIONS and at(i + 1) in ("by", "without")):
            if text not in FUNCTIONS:
                raise ValueError(f"{text}() is no PromQL function in {expr!r}")
            query.aggregated |= text in AGGREGATIONS
            i += 1
        else:
            selector = Selector(text)
            i += 1
            if at(i) == "{":
                i += 1
                while at(i) != "}":
                    if len(toks) < i + 3:
                        raise ValueError(f"the matchers of {text} are not closed in {expr!r}")
                    label, operator, value = toks[i : i + 3]
                    if label[0] != "ident" or operator[1] not in MATCH_OPERATORS or value[0] != "string":
                        raise ValueError(f"cannot read the matchers of {text} in {expr!r}")
                    selector.matchers.append((label[1], operator[1], value[1][1:-1]))
                    i += 3
                    if at(i) == ",":
                        i += 1
                i += 1
            query.selectors.append(selector)
    return query


# -- what the controller exports ------------------------------------------------------------------------


@dataclass(frozen=True)
class Exported:
    labels: dict[str, frozenset[str]]  # sample name -> its label names (`le` for histogram buckets)
    values: dict[tuple[str, str], frozenset[str]]  # (sample name, label) -> the values it takes, where known


def collectors(metrics: Metrics) -> Iterator[MetricWrapperBase]:
    for value in vars(metrics).values():
        for member in value.values() if isinstance(value, dict) else (value,):
            if isinstance(member, MetricWrapperBase):
                yield member


@functools.cache
def exported() -> Exported:
    """The sample names, label names and known label values of the controller's metrics, from the
    metrics object itself: what a fresh controller exports gives the values of the labels it fills in at
    start (states, outcomes, styles); each labelled metric is then given one child, since one without any
    exports no sample at all. prometheus_client has no public way to read a metric's label names before
    a child exists, hence `_labelnames`."""
    metrics = Metrics(CollectorRegistry())
    values: dict[tuple[str, str], set[str]] = defaultdict(set)
    for family in metrics.registry.collect():
        for sample in family.samples:
            for label, value in sample.labels.items():
                values[(sample.name, label)].add(value)
    values[("yuniplace_events_total", "reason")].update(reason.value for reason in Reason)
    values[("yuniplace_events_total", "type")].update((NORMAL, WARNING))
    for collector in collectors(metrics):
        if collector._labelnames:
            collector.labels(*("-" for _ in collector._labelnames))
    families = list(metrics.registry.collect())
    assert all(family.samples for family in families), "a metric of the registry is not an attribute of Metrics"
    labels: dict[str, set[str]] = defaultdict(set)
    for family in families:
        for sample in family.samples:
            labels[sample.name].update(sample.labels)
    return Exported(
        labels={name: frozenset(names) for name, names in labels.items()},
        values={key: frozenset(known) for key, known in values.items()},
    )


def problems(expr: str, legend: str = "") -> list[str]:
    """Why `expr` would show nothing, or not what it says: a metric the controller does not export, a
    label it does not have, a label value it never takes, a legend naming a label the result lacks."""
    try:
        query = read(expr)
    except ValueError as error:
        return [str(error)]
    controller = exported()
    found: list[str] = []
    available: set[str] = set(TARGET_LABELS)
    for selector in query.selectors:
        labels = controller.labels.get(selector.metric)
        if labels is None:
            found.append(f"{selector.metric} is not exported by the controller")
            continue
        available |= labels
        for label, operator, value in selector.matchers:
            if label not in labels | TARGET_LABELS:
                found.append(f"{selector.metric} has no label {label}")
            elif "$" not in value:
                known = controller.values.get((selector.metric, label))
                wanted = value.split("|") if operator in ("=~", "!~") else [value]
                if known is None:
                    found.append(f"{selector.metric}{{{label}{operator}{value!r}}}: no known values to check it by")
                elif unknown := [v for v in wanted if v not in known]:
                    found.append(f"{selector.metric}{{{label}}} never takes {unknown} (only {sorted(known)})")
    if missing := query.grouping - available:
        found.append(f"groups by {sorted(missing)}, which no metric of {expr!r} has")
    shown = query.grouping if query.aggregated else available
    if missing := set(LEGEND_LABEL.findall(legend)) - shown:
        found.append(f"legend {legend!r} names {sorted(missing)}, not in the result of {expr!r}")
    return found


# -- the dashboard ---------------------------------------------------------------------------------------


def load() -> dict[str, Any]:
    dashboard = json.loads(DASHBOARD.read_text())
    assert isinstance(dashboard, dict)
    return dashboard


def all_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {variable["name"]: variable for variable in dashboard["templating"]["list"]}


def variable_query(variable: dict[str, Any]) -> str:
    """A query variable's PromQL: a string, or an object with `query` as newer Grafana writes it."""
    query = variable["query"]
    return str(query["query"] if isinstance(query, dict) else query)


def test_dashboard_has_the_shape_grafana_loads() -> None:
    dashboard = load()
    assert isinstance(dashboard["title"], str) and dashboard["title"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", dashboard["uid"]), "Grafana's uid: at most 40 of [A-Za-z0-9_-]"
    # 36 and later reference data sources by {type, uid}, as every panel here does.
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert dashboard["id"] is None, "an id is the Grafana instance's own: provisioned dashboards leave it null"
    assert {"from", "to"} <= dashboard["time"].keys()

    defined = variables(dashboard)
    assert len(defined) == len(dashboard["templating"]["list"]), "variable names repeat"
    assert defined["datasource"]["type"] == "datasource" and defined["datasource"]["query"] == "prometheus"
    for variable in defined.values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]

    ids = [panel["id"] for panel in all_panels(dashboard)]
    assert all(isinstance(i, int) for i in ids) and len(ids) == len(set(ids)), f"panel ids must be unique: {ids}"
    cells: dict[tuple[int, int], str] = {}
    for panel in all_panels(dashboard):
        title = panel["title"]
        assert panel["type"] in PANEL_TYPES, title
        pos = panel["gridPos"]
        assert all(isinstance(pos[k], int) for k in "hwxy") and pos["h"] > 0 and pos["w"] > 0, title
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= GRID_WIDTH, f"{title} overflows the 24 columns"
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{title} overlaps {cells[(x, y)]}"
                cells[(x, y)] = title
        if panel["type"] == "row":
            assert "targets" not in panel, title
            assert panel.get("repeat") in (None, *defined), f"{title} repeats for an unknown variable"
            continue
        assert panel["datasource"] == DATASOURCE, f"{title}: the data source must be the $datasource variable"
        assert panel["targets"], f"{title} queries nothing"
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), f"{title}: refIds repeat"
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, title
            assert isinstance(target["expr"], str) and target["expr"].strip(), title


def test_every_variable_used_is_defined() -> None:
    dashboard = load()
    defined = variables(dashboard)
    texts = [panel["title"] for panel in all_panels(dashboard)]
    texts += [target["expr"] for panel in all_panels(dashboard) for target in panel.get("targets", [])]
    texts += [variable_query(v) for v in defined.values() if v["type"] == "query"]
    used = {a or b for text in texts for a, b in VARIABLE.findall(text)}
    assert {"job", "queue", "resource"} <= used
    assert not {name for name in used if not name.startswith("__")} - defined.keys()


def test_every_query_reads_only_what_the_controller_exports() -> None:
    dashboard = load()
    found = {
        f"{panel['title']} {target['refId']}": problems(target["expr"], target.get("legendFormat", ""))
        for panel in all_panels(dashboard)
        for target in panel.get("targets", [])
    }
    for variable in variables(dashboard).values():
        if variable["type"] != "query":
            continue
        match = LABEL_VALUES.fullmatch(variable_query(variable))
        assert match, f"${variable['name']}: only label_values(<selector>, <label>) is read here"
        selector = match["selector"]
        found[f"${variable['name']}"] = problems(selector, "{{" + match["label"] + "}}")
    assert not {where: why for where, why in found.items() if why}


def test_every_series_is_of_the_chosen_job() -> None:
    """With several releases in one Prometheus, each series is filtered by the $job variable."""
    dashboard = load()
    exprs = [target["expr"] for panel in all_panels(dashboard) for target in panel.get("targets", [])]
    exprs += [variable_query(v) for v in variables(dashboard).values() if v["name"] not in ("datasource", "job")]
    for expr in exprs:
        for selector in read(LABEL_VALUES.sub(r"\g<selector>", expr)).selectors:
            assert ("job", "=~", "$job") in selector.matchers, f"{selector.metric} in {expr!r}"


def test_every_per_queue_metric_is_graphed() -> None:
    """A queue gauge added to the controller shows up here as missing from the dashboard."""
    dashboard = load()
    graphed = {
        selector.metric
        for panel in all_panels(dashboard)
        for target in panel.get("targets", [])
        for selector in read(target["expr"]).selectors
    }
    per_queue = {name for name, labels in exported().labels.items() if "queue" in labels}
    assert per_queue == {
        "yuniplace_queue_guaranteed",
        "yuniplace_queue_max",
        "yuniplace_queue_used",
        "yuniplace_queue_borrowed",
        "yuniplace_queue_lent",
        "yuniplace_queue_waiting_applications",
    }
    assert per_queue <= graphed


def test_swaps_timeouts_admissions_and_reclaims_are_graphed() -> None:
    dashboard = load()
    exprs = " ".join(target["expr"] for panel in all_panels(dashboard) for target in panel.get("targets", []))
    for needed in (
        "yuniplace_swaps_total",
        "yuniplace_timeouts_total",
        "yuniplace_admission_cycle_duration_seconds_bucket",
        'reason="CreatingPlaceholders"',
        'reason="GangPreempted"',
    ):
        assert needed in exprs


@pytest.mark.parametrize(
    ("expr", "legend", "complaint"),
    [
        ("sum(rate(yuniplace_swap_total[5m]))", "", "yuniplace_swap_total is not exported"),
        ("yuniplace_swaps", "", "yuniplace_swaps is not exported"),
        ("sum(up)", "", "up is not exported"),
        ("rat(yuniplace_swaps_total[5m])", "", "rat() is no PromQL function"),
        ('yuniplace_swaps_total{result="landed"}', "", "has no label result"),
        ('yuniplace_swaps_total{outcome="lost"}', "", "never takes ['lost']"),
        ('yuniplace_events_total{reason=~"GangPreempted|GangEvicted"}', "", "never takes ['GangEvicted']"),
        ('yuniplace_queue_used{resource="cpu"}', "", "no known values to check it by"),
        ("sum by (queue) (yuniplace_swaps_total)", "", "groups by ['queue']"),
        ("sum by (outcome) (yuniplace_swaps_total)", "{{style}}", "legend '{{style}}' names ['style']"),
        ("sum(yuniplace_swaps_total)", "{{outcome}}", "legend '{{outcome}}' names ['outcome']"),
        ("yuniplace_swaps_total offset 5m", "", "offset is not exported"),
        ("yuniplace_swaps_total[1x]", "", "neither a duration nor a Grafana interval"),
        ('{__name__="yuniplace_swaps_total"}', "", "a selector without a metric name"),
    ],
)
def test_the_checks_catch_what_would_leave_a_panel_empty(expr: str, legend: str, complaint: str) -> None:
    assert any(complaint in problem for problem in problems(expr, legend)), problems(expr, legend)


def test_the_reader_finds_every_selector_and_grouping() -> None:
    query = read(
        'sum by (queue) (rate(a_total{job=~"$job", x!="y"}[$__rate_interval])) / on (queue) group_left b'
        " and max without (instance) (c)"
    )
    assert [(s.metric, s.matchers) for s in query.selectors] == [
        ("a_total", [("job", "=~", "$job"), ("x", "!=", "y")]),
        ("b", []),
        ("c", []),
    ]
    assert query.grouping == {"queue", "instance"}
