// Command controlplane is one binary holding the Kubernetes components of yuniplace's local control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl). Linking them once,
// instead of once per component, saves most of the link time and disk of separate binaries; the
// component runs by the name it is called as (a symlink such as kube-apiserver -> controlplane) or by
// its first argument. kwok lives in its own module (kwok/) because its release pins an older
// apimachinery than this Kubernetes release.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	_ "time/tzdata" // CronJob time zones, as the upstream apiserver and controller-manager binaries embed

	"go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var components = map[string]func() int{
	"etcd": func() int {
		etcdmain.Main(os.Args)
		return 0
	},
	"kube-apiserver": func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	},
	"kube-scheduler": func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kubectl":        runKubectl,
}

func runKubectl() int {
	// Verbosity must be known before the command is built, because building it reads .kuberc.
	_, _ = logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
		kubectlutil.CheckErr(err)
	}
	return 0
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := components[name]; !ok && len(os.Args) > 1 {
		// Called by its own name: the component is the first argument, and the component sees
		// itself as argv[0] (cobra and etcd read os.Args directly).
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	run, ok := components[name]
	if !ok {
		names := make([]string, 0, len(components))
		for n := range components {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: %s COMPONENT [ARGS...]\ncomponents: %v\n", filepath.Base(os.Args[0]), names)
		os.Exit(2)
	}
	os.Exit(run())
}
