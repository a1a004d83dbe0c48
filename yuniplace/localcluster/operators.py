"""The operators users submit gangs through, built from their Go modules for the end-to-end tests that
run them out of cluster against the local control plane: the Kubeflow spark-operator and KubeRay's
operator (and, built with them, the autoscaler and Kueue, which the tests and the bench run the same
way). Each is pinned by a module of its own under controlplane/ and cached like the control plane
(by a hash of its go.mod and go.sum); its CustomResourceDefinitions come from the same module."""

from __future__ import annotations

from yuniplace.localcluster.build import BuildError, Operator, ensure_operator
from yuniplace.localcluster.karpenter import ensure_karpenter
from yuniplace.localcluster.kueue import ensure_kueue

SPARK_OPERATOR_MODULE = "github.com/kubeflow/spark-operator/v2"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"


def ensure_spark_operator(*, quiet: bool = False) -> Operator:
    """The Kubeflow spark-operator (about 2 minutes to build on 2 cores)."""
    return ensure_operator(
        "sparkoperator",
        SPARK_OPERATOR_MODULE,
        f"{SPARK_OPERATOR_MODULE}/cmd/operator",
        "spark-operator",
        "the Kubeflow spark-operator",
        2,
        quiet,
    )


def ensure_kuberay(*, quiet: bool = False) -> Operator:
    """KubeRay's operator (about 2 minutes to build on 2 cores)."""
    return ensure_operator(
        "kuberay", KUBERAY_MODULE, KUBERAY_MODULE, "kuberay-operator", "KubeRay's operator", 2, quiet
    )


def main() -> int:
    """`python -m yuniplace.localcluster.operators`: build (or find) every operator, the autoscaler and
    Kueue, and print their paths."""
    try:
        for operator in (ensure_spark_operator(), ensure_kuberay(), ensure_karpenter(), ensure_kueue()):
            print(operator.binary)
    except BuildError as error:
        print(f"operators: {error}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
