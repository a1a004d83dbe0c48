// Command kindnode is one binary holding what runs on a kind node outside the control-plane images:
// kubelet, kubeadm, kube-proxy, kubectl, and kind-netd (the node network agent of package netd).
// As in controlplane/main.go, the component runs by the name it is called as (a symlink such as
// kubelet -> kindnode) or by its first argument; one link instead of five saves most of the build.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	kubeadm "k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"yuniplace.io/controlplane/kind/netd"
)

var components = map[string]func() int{
	"kubelet":    func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"kube-proxy": func() int { return cli.Run(proxy.NewProxyCommand()) },
	"kubeadm": func() int {
		kubeadmerrors.HandleError(kubeadm.Run())
		return 0
	},
	"kubectl":   runKubectl,
	"kind-netd": netd.Main,
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
