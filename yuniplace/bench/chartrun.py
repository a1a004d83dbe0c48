"""yuniplace as its users run it, for the bench's timed scenarios: its Helm chart installed with its
defaults, and the controller started from this checkout with the arguments the chart's Deployment gives
it, serving the chart's webhooks in its own process (called by the API server on loopback). The
webhooks are confined to namespaces with LABEL, so every other peer's pods never meet them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from yuniplace.localcluster import LocalCluster, chartinstall
from yuniplace.localcluster.chartinstall import Installation
from yuniplace.localcluster.ports import free_ports

LABEL = {"bench.yuniplace.io/webhook": "yuniplace"}
RELEASE = "yuniplace"
NAMESPACE = "yuniplace-system"
# The controller's ServiceAccount token must outlast a full run of the bench (hours on 1 000 nodes).
TOKEN_LIFETIME_S = 24 * 3600


@dataclass(frozen=True)
class ChartRun:
    installation: Installation
    webhook_address: str

    def controller_args(self) -> list[str]:
        """`yuniplace controller`'s arguments as the chart's Deployment gives them (its workers, its
        webhook, its ServiceAccount, leader election)."""
        return self.installation.controller_args(self.webhook_address)

    @staticmethod
    def namespace(cluster: LocalCluster, name: str) -> None:
        """A namespace whose pods the chart's webhooks see."""
        cluster.create_namespace(name, labels=dict(LABEL))


def install(cluster: LocalCluster, workdir: Path) -> ChartRun:
    (port,) = free_ports(1)
    cluster.create_namespace(NAMESPACE)
    ((key, value),) = LABEL.items()
    installation = chartinstall.install(
        cluster,
        release=RELEASE,
        namespace=NAMESPACE,
        webhook_port=port,
        workdir=workdir,
        values={"webhook.namespaceSelector.matchLabels." + key.replace(".", r"\."): value},
        token_lifetime_s=TOKEN_LIFETIME_S,
    )
    return ChartRun(installation, f"127.0.0.1:{port}")
