"""A real spark-submit against the local control plane, with yuniplace installed by its Helm chart.

spark-submit is Apache Spark's own, from PyPI's pyspark, on the machine's Java runtime; it talks to
the apiserver with the cluster's admin kubeconfig through Spark's Kubernetes client (fabric8). In
cluster mode it creates the driver pod, which the webhook gates, and yuniplace reserves the whole gang
with placeholders and swaps the driver in. kwok runs no container, so the driver never runs Spark:
the test creates the executors exactly as Spark's driver would (from the driver's own configuration,
which spark-submit left in its ConfigMap), and they swap in too. The Kubeflow spark-operator, built
from its Go module and run out of cluster, goes through the same flow with the SparkApplication example.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import IN_CI
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Pod,
    chart_installed,
    finish,
    free_port,
    is_ready,
    is_running,
    members_landed,
    placeholders,
)
from yuniplace.gang import keys
from yuniplace.kube import NotFound
from yuniplace.localcluster import wait_until
from yuniplace.localcluster.operators import Operator, ensure_spark_operator
from yuniplace.localcluster.spark import Spark, SparkError, ensure_spark
from yuniplace.tools import sparkconf

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "spark"
SUBMIT_TIMEOUT_S = 180
GANG_WAIT_S = 90.0
# The chart as installed by default: pods for `schedulerName: yunikorn`
# (spark.kubernetes.scheduler.name=yunikorn) are rewritten to the default scheduler, and so gated and
# reserved, since no YuniKorn scheduler runs (webhook.rewriteSchedulerName: auto).
CHART_DEFAULTS: dict[str, str] = {}
EXECUTOR_ANNOTATION = "spark.kubernetes.executor.annotation."
EXECUTOR_LABEL = "spark.kubernetes.executor.label."


@pytest.fixture(scope="module")
def spark(cluster: Cluster) -> Spark:
    """spark-submit from the cached pyspark (installed on first use); no Java runtime skips these
    tests with how to get one, or fails them in CI."""
    try:
        return ensure_spark()
    except SparkError as error:
        if IN_CI:
            raise
        pytest.skip(f"Spark e2e tests: {error}")


@pytest.fixture
def controller(
    request: pytest.FixtureRequest, cluster: Cluster, namespace: str, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """yuniplace installed with the chart values the test is parametrized with (see CHART_*); named
    like conftest's fixture so that its log is shown when a test fails."""
    with chart_installed(cluster, namespace, tmp_path / "chart", request.param) as process:
        yield process


# -- what the test plays of Spark's driver -------------------------------------------------------------


def driver_conf(cluster: Cluster, namespace: str, driver: Pod) -> sparkconf.SparkConf:
    """The Spark configuration the driver starts with: spark-submit writes it to a ConfigMap mounted
    into the driver pod as spark.properties, once the pod is created."""
    volume = next(v for v in driver["spec"]["volumes"] if v["name"] == "spark-conf-volume-driver")
    path = f"/api/v1/namespaces/{namespace}/configmaps/{volume['configMap']['name']}"

    def config_map() -> dict[str, Any] | None:
        try:
            return cluster.client.get(path)
        except NotFound:
            return None

    return sparkconf.read_properties(wait_until(config_map, 30)["data"]["spark.properties"])


def executor_pod(driver: Pod, conf: sparkconf.SparkConf, number: int) -> Pod:
    """Executor `number` as Spark's driver creates it (BasicExecutorFeatureStep): Spark's labels, the
    configured executor labels and annotations, sized from spark.executor.*, owned by the driver."""
    labels = driver["metadata"]["labels"]
    prefix = conf.get("spark.kubernetes.executor.podNamePrefix") or driver["metadata"]["name"].removesuffix("-driver")
    name = f"{prefix}-exec-{number}"
    factor = (
        conf.get("spark.executor.memoryOverheadFactor") or conf.get("spark.kubernetes.memoryOverheadFactor") or "0.1"
    )
    memory = sparkconf.pod_memory(
        conf.get("spark.executor.memory") or "1g", conf.get("spark.executor.memoryOverhead"), float(factor)
    )
    cores = conf.get("spark.kubernetes.executor.request.cores") or conf.get("spark.executor.cores") or "1"
    settings = {s.key: s.value for s in conf.settings}
    pod: Pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                **{
                    key.removeprefix(EXECUTOR_LABEL): value
                    for key, value in settings.items()
                    if key.startswith(EXECUTOR_LABEL)
                },
                "spark-app-selector": conf.get("spark.app.id"),
                "spark-app-name": labels["spark-app-name"],
                "spark-exec-id": str(number),
                "spark-exec-resourceprofile-id": "0",
                "spark-role": "executor",
                "spark-version": labels["spark-version"],
            },
            "annotations": {
                key.removeprefix(EXECUTOR_ANNOTATION): value
                for key, value in settings.items()
                if key.startswith(EXECUTOR_ANNOTATION)
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": driver["metadata"]["name"],
                    "uid": driver["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "hostname": name[:63],
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "spark-kubernetes-executor",
                    "image": conf.get("spark.kubernetes.executor.container.image")
                    or conf.get("spark.kubernetes.container.image"),
                    "args": ["executor"],
                    "env": [
                        {"name": "SPARK_EXECUTOR_ID", "value": str(number)},
                        {"name": "SPARK_APPLICATION_ID", "value": conf.get("spark.app.id")},
                    ],
                    "resources": {"requests": {"cpu": cores, "memory": memory}, "limits": {"memory": memory}},
                }
            ],
        },
    }
    scheduler = conf.get("spark.kubernetes.executor.scheduler.name") or conf.get("spark.kubernetes.scheduler.name")
    if scheduler:
        pod["spec"]["schedulerName"] = scheduler
    return pod


# -- the gang, as a user sees it -----------------------------------------------------------------------


def first_versions(recorder: NamespaceRecorder) -> dict[str, Pod]:
    """Each pod as it was created (after admission), filled in by the namespace's watch."""
    first: dict[str, Pod] = {}

    def seen(pod: Pod) -> None:
        first.setdefault(pod["metadata"]["name"], pod)

    recorder.callbacks.append(seen)
    return first


def created_gated(first: dict[str, Pod], name: str) -> bool:
    """Whether the pod was created with yuniplace's scheduling gate (by the webhook), once the
    namespace's watch has seen its creation."""
    pod = wait_until(lambda: first.get(name), 30)
    return {"name": keys.GATE} in (pod["spec"].get("schedulingGates") or [])


def swapped_in(cluster: Cluster, recorder: NamespaceRecorder, namespace: str, name: str, group: str) -> Pod:
    """Wait until the pod runs, and check it runs on the node held by the placeholder of `group`
    whose place it took."""
    pod = cluster.wait_pod(namespace, name, is_running, GANG_WAIT_S)
    taken = (pod["metadata"].get("annotations") or {}).get(keys.SWAP_PLACEHOLDER)
    assert taken is not None, f"{name} runs without having taken a placeholder's place: {pod['metadata']}"
    placeholder = recorder.placeholder_node(taken)
    assert placeholder == (group, pod["spec"]["nodeName"]), (
        f"{name} runs on {pod['spec']['nodeName']}, its placeholder {taken} was {placeholder}"
    )
    return pod


def yuniplace_events(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    items = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json"))["items"]
    ours = [e for e in items if e.get("reportingComponent") == "yuniplace.io/controller"]
    return sorted(ours, key=lambda e: e.get("eventTime") or e["metadata"]["creationTimestamp"])


def run_gang(
    cluster: Cluster,
    namespace: str,
    recorder: NamespaceRecorder,
    first: dict[str, Pod],
    driver_name: str,
    record_property: Callable[[str, object], None],
) -> sparkconf.SparkConf:
    """From the driver pod Spark created to every member swapped in and no placeholder left; records
    yuniplace's events as the test's figure; returns the driver's Spark configuration."""
    assert created_gated(first, driver_name), (
        f"the webhook did not gate the driver Spark created: {first[driver_name]['spec']}"
    )
    driver = swapped_in(cluster, recorder, namespace, driver_name, "spark-driver")
    assert driver["spec"]["schedulerName"] == "default-scheduler"

    conf = driver_conf(cluster, namespace, driver)
    executors = [executor_pod(driver, conf, n) for n in range(1, int(conf.get("spark.executor.instances") or "2") + 1)]
    for pod in executors:
        cluster.create_pod(namespace, pod)
    for pod in executors:
        name = pod["metadata"]["name"]
        swapped_in(cluster, recorder, namespace, name, "spark-executor")
        assert created_gated(first, name), f"the webhook did not gate executor {name}"
    assert len(recorder.placeholder_uids) == 1 + len(executors), sorted(recorder.placeholder_uids)
    try:
        wait_until(lambda: not placeholders(cluster, namespace), 60)
    except TimeoutError:
        raise AssertionError(
            f"placeholders left: {[p['metadata']['name'] for p in placeholders(cluster, namespace)]}"
        ) from None

    members = 1 + len(executors)
    wait_until(lambda: members_landed(yuniplace_events(cluster, namespace)) == members, 30)
    events = yuniplace_events(cluster, namespace)
    lines = [f"{event['reason']} {event['involvedObject']['name']}: {event['message']}" for event in events]
    record_property("figure", f"{len(events)} yuniplace events in {namespace}:\n  " + "\n  ".join(lines))
    return conf


def apiserver(cluster: Cluster) -> str:
    return str(yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


def in_namespace(namespace: str) -> list[str]:
    """What a test adds to the documented command lines: its namespace, and no waiting for the
    application (whose driver never really runs)."""
    return [
        "--conf",
        f"spark.kubernetes.namespace={namespace}",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=false",
    ]


def submit(spark: Spark, cluster: Cluster, namespace: str, command: list[str], cwd: Path) -> str:
    """Run a spark-submit command line as a user would, with the admin kubeconfig in KUBECONFIG;
    return the name of the driver pod it deployed."""
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**spark.env(), "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=SUBMIT_TIMEOUT_S,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"spark-submit exited {result.returncode}:\n{output[-4000:]}"
    deployed = next((line for line in output.splitlines() if "Deployed Spark application" in line), None)
    assert deployed is not None, output[-4000:]
    return deployed.split(f"submission ID {namespace}:", 1)[1].split()[0]


# -- spark-submit --------------------------------------------------------------------------------------


@pytest.mark.parametrize("controller", [CHART_DEFAULTS], indirect=True, ids=["chart-defaults"])
def test_yunikorn_documented_conf_options(
    spark: Spark,
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    """YuniKorn's documented way: the annotations as --conf options and
    spark.kubernetes.scheduler.name=yunikorn, through examples/spark/spark-submit.sh as its usage line
    says, run from another directory than the repository."""
    first = first_versions(recorder)
    command = [
        str(EXAMPLES / "spark-submit.sh"),
        f"k8s://{apiserver(cluster)}",
        "--conf",
        "spark.kubernetes.scheduler.name=yunikorn",
        *in_namespace(namespace),
    ]
    driver = submit(spark, cluster, namespace, command, tmp_path)
    conf = run_gang(cluster, namespace, recorder, first, driver, record_property)
    assert conf.get("spark.kubernetes.scheduler.name") == "yunikorn"  # what Spark asked for, rewritten by the webhook


@pytest.mark.parametrize("controller", [CHART_DEFAULTS], indirect=True, ids=["chart-defaults"])
def test_properties_file_example(
    spark: Spark,
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    record_property: Callable[[str, object], None],
) -> None:
    """examples/spark/spark-gang.properties with --properties-file, the command line its header and the
    README give, from the repository root, with the chart's default values."""
    first = first_versions(recorder)
    command = [
        str(spark.submit),
        "--properties-file",
        "examples/spark/spark-gang.properties",
        "--master",
        f"k8s://{apiserver(cluster)}",
        "--deploy-mode",
        "cluster",
        "--name",
        "spark-pi",
        "--class",
        "org.apache.spark.examples.SparkPi",
        *in_namespace(namespace),
        "local:///opt/spark/examples/jars/spark-examples.jar",
    ]
    driver = submit(spark, cluster, namespace, command, EXAMPLES.parents[1])
    conf = run_gang(cluster, namespace, recorder, first, driver, record_property)
    assert conf.get("spark.kubernetes.driver.annotation.yunikorn.apache.org/schedulingPolicyParameters") == (
        "placeholderTimeoutInSeconds=120 gangSchedulingStyle=Hard"
    )


# -- the Kubeflow spark-operator -----------------------------------------------------------------------

SPARK_APPLICATIONS = "/apis/sparkoperator.k8s.io/v1beta2"


@pytest.fixture(scope="module")
def spark_operator(spark: Spark, cluster: Cluster) -> Iterator[Operator]:
    """The operator built from its Go module, with its CustomResourceDefinitions installed."""
    operator = ensure_spark_operator()
    for crd in operator.crds:
        cluster.kubectl("apply", "--server-side", "-f", str(crd))

    def served() -> bool:
        try:
            return any(r["name"] == "sparkapplications" for r in cluster.client.get(SPARK_APPLICATIONS)["resources"])
        except NotFound:
            return False

    wait_until(served, 30)
    yield operator
    for crd in operator.crds:
        cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", str(crd))


@pytest.fixture
def operator_process(
    spark: Spark, spark_operator: Operator, cluster: Cluster, namespace: str, tmp_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """`spark-operator controller start` out of cluster, for the test's namespace: it finds the apiserver
    as in a pod (KUBERNETES_SERVICE_HOST/PORT, for spark-submit's --master), runs spark-submit from
    SPARK_HOME, and both use the admin kubeconfig. Its pod webhook is not run. It writes pod templates
    to /tmp/spark/<submission ID> whatever TMPDIR says, and leaves them: they are removed afterwards."""
    server = apiserver(cluster).removeprefix("https://")
    host, _, api_port = server.rpartition(":")
    port = free_port()
    env = {
        **spark.env(),
        "KUBECONFIG": str(cluster.kubeconfig),
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": api_port,
    }
    log = tmp_path / "spark-operator.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                str(spark_operator.binary),
                "controller",
                "start",
                f"--kubeconfig={cluster.kubeconfig}",
                f"--namespaces={namespace}",
                "--enable-batch-scheduler",
                "--enable-ui-service=false",
                f"--health-probe-bind-address=127.0.0.1:{port}",
                "--metrics-bind-address=0",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"spark-operator exited ({process.returncode}):\n{log.read_text()[-4000:]}")
        return is_ready(port)

    try:
        wait_until(ready, 60)
        yield process
    finally:
        process.terminate()
        process.wait(30)
        for app in cluster.client.get(f"{SPARK_APPLICATIONS}/namespaces/{namespace}/sparkapplications")["items"]:
            submission = app.get("status", {}).get("submissionID")
            if submission:
                shutil.rmtree(Path("/tmp/spark") / submission, ignore_errors=True)


def application_state(cluster: Cluster, namespace: str, name: str) -> str:
    app = cluster.client.get(f"{SPARK_APPLICATIONS}/namespaces/{namespace}/sparkapplications/{name}")
    return str(app.get("status", {}).get("applicationState", {}).get("state", ""))


@pytest.mark.parametrize(
    ("controller", "batch_scheduler"),
    [(CHART_DEFAULTS, None), (CHART_DEFAULTS, "yunikorn")],
    indirect=["controller"],
    ids=["as-shipped-chart-defaults", "batchScheduler-yunikorn-chart-defaults"],
)
def test_spark_operator_runs_the_sparkapplication_example(
    spark: Spark,
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    operator_process: subprocess.Popen[bytes],
    recorder: NamespaceRecorder,
    batch_scheduler: str | None,
    record_property: Callable[[str, object], None],
) -> None:
    """examples/spark/sparkapplication.yaml applied with kubectl, the operator running spark-submit.
    With `batchScheduler: yunikorn` the operator writes the task groups itself (from the application's
    sizes) and, through its pod webhook, sets schedulerName: yunikorn on the pods; that webhook is not
    run here, so spark.kubernetes.scheduler.name=yunikorn in sparkConf gives the pods the same name."""
    application = yaml.safe_load((EXAMPLES / "sparkapplication.yaml").read_text())
    if batch_scheduler:
        application["spec"]["batchScheduler"] = batch_scheduler
        application["spec"]["sparkConf"] = {"spark.kubernetes.scheduler.name": batch_scheduler}
    cluster.client.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"metadata": {"name": application["spec"]["driver"]["serviceAccount"]}},
    )
    first = first_versions(recorder)
    subprocess.run(
        [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}", "-n", namespace, "apply", "-f", "-"],
        input=yaml.safe_dump(application),
        text=True,
        capture_output=True,
        timeout=60,
        check=True,
    )
    name = application["metadata"]["name"]
    conf = run_gang(cluster, namespace, recorder, first, f"{name}-driver", record_property)
    wait_until(lambda: application_state(cluster, namespace, name) == "RUNNING", 30)
    if batch_scheduler:
        generated = conf.get("spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups") or "[]"
        assert [g["name"] for g in json.loads(generated)] == ["spark-driver", "spark-executor"], generated
        assert conf.get("spark.kubernetes.scheduler.name") == batch_scheduler
        record_property("figure", f"task groups the operator wrote: {generated}")
    finish(cluster, namespace, f"{name}-driver")
    wait_until(lambda: application_state(cluster, namespace, name) == "COMPLETED", 60)
