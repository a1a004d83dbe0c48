// Command yunikorn-scheduler runs Apache YuniKorn's scheduler (its Kubernetes shim and core, linked
// from their Go modules) as a peer in yuniplace's benchmarks, on the same local cluster.
//
// It is started the way the shim's own command starts it, with one difference: the core's REST
// service, which the shim's command opens on every interface at a fixed port, is left off, so the
// benchmark's cluster stays on loopback only.
package main

import (
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/apache/yunikorn-core/pkg/entrypoint"
	corelog "github.com/apache/yunikorn-core/pkg/log"
	"github.com/apache/yunikorn-k8shim/pkg/client"
	"github.com/apache/yunikorn-k8shim/pkg/conf"
	"github.com/apache/yunikorn-k8shim/pkg/log"
	"github.com/apache/yunikorn-k8shim/pkg/plugin/predicates"
	"github.com/apache/yunikorn-k8shim/pkg/shim"
)

func fail(what string, err error) {
	log.Log(log.Shim).Fatal(what, zap.Error(err))
}

func main() {
	predicates.EnableOptionalKubernetesFeatureGates()
	configMaps, err := client.LoadBootstrapConfigMaps() // yunikorn-configs in $NAMESPACE, if any
	if err != nil {
		fail("loading configuration", err)
	}
	if err := conf.UpdateConfigMaps(configMaps, true); err != nil {
		fail("applying configuration", err)
	}
	corelog.InitializeLogger(log.RootLogger(), log.GetZapConfigs())
	const withWebApp, withMetricsHistory = false, false
	core := entrypoint.StartAllServicesWithParams(withWebApp, withMetricsHistory)
	scheduler := shim.NewShimScheduler(core.RMProxy, conf.GetSchedulerConf(), configMaps)
	if err := scheduler.Run(); err != nil {
		fail("starting the scheduler", err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	scheduler.Stop()
}
