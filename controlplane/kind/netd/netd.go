// Package netd is the network agent of the kind nodes (run as the kind-netd DaemonSet, host network):
// pods get addresses from their node's spec.podCIDR through the ptp and host-local CNI plugins, and
// every node routes each other node's pod range to that node's InternalIP. All nodes share one
// Docker network, so plain routes are the whole overlay.
package netd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

const (
	confDir  = "/etc/cni/net.d"
	confName = "10-kind-netd.conflist"
	// The kubelet reports NotReady until a configuration appears, so the file is written only once
	// the node has its pod range.
	networkName = "kind-netd"
)

// Main runs the agent until SIGTERM; NODE_NAME (from the downward API) names the node it runs on.
func Main() int {
	self := os.Getenv("NODE_NAME")
	if self == "" {
		fmt.Fprintln(os.Stderr, "kind-netd: NODE_NAME is not set")
		return 2
	}
	config, err := rest.InClusterConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kind-netd: %v\n", err)
		return 1
	}
	client := kubernetes.NewForConfigOrDie(config)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	nodes := factory.Core().V1().Nodes()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		fmt.Fprintf(os.Stderr, "kind-netd: %v\n", err)
		return 1
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	agent := &agent{self: self, lister: nodes.Lister(), routes: map[string]*netlink.Route{}}
	retry := time.NewTimer(time.Hour)
	for {
		if err := agent.sync(); err != nil {
			klog.ErrorS(err, "sync failed; retrying")
			retry.Reset(5 * time.Second)
		}
		select {
		case <-ctx.Done():
			return 0
		case <-changed:
		case <-retry.C:
		}
	}
}

type agent struct {
	self     string
	lister   listers.NodeLister
	routes   map[string]*netlink.Route // by pod range, the routes this agent added
	conflist []byte
}

func (a *agent) sync() error {
	all, err := a.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	wanted := map[string]*netlink.Route{}
	for _, node := range all {
		if node.Spec.PodCIDR == "" {
			continue
		}
		_, podRange, err := net.ParseCIDR(node.Spec.PodCIDR)
		if err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
		if node.Name == a.self {
			if err := a.writeConf(node.Spec.PodCIDR); err != nil {
				return err
			}
			continue
		}
		if gateway := internalIP(node); gateway != nil {
			wanted[podRange.String()] = &netlink.Route{Dst: podRange, Gw: gateway}
		}
	}
	for key, route := range wanted {
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("route %s via %s: %w", key, route.Gw, err)
		}
		if _, known := a.routes[key]; !known {
			klog.InfoS("route added", "podCIDR", key, "via", route.Gw.String())
		}
	}
	for key, route := range a.routes {
		if _, keep := wanted[key]; !keep {
			if err := netlink.RouteDel(route); err != nil {
				klog.ErrorS(err, "route not removed", "podCIDR", key)
			}
		}
	}
	a.routes = wanted
	return nil
}

func internalIP(node *corev1.Node) net.IP {
	for _, address := range node.Status.Addresses {
		if address.Type == corev1.NodeInternalIP {
			if ip := net.ParseIP(address.Address); ip != nil && ip.To4() != nil {
				return ip
			}
		}
	}
	return nil
}

// writeConf installs the CNI configuration for this node's pod range: a point-to-point veth per pod
// (so every packet is routed, and Service NAT applies to pods of the same node too), host-local
// addresses, and hostPort mappings.
func (a *agent) writeConf(podCIDR string) error {
	conflist := map[string]any{
		"cniVersion": "1.0.0",
		"name":       networkName,
		"plugins": []any{
			map[string]any{
				"type": "ptp",
				"mtu":  1500,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"ranges":  []any{[]any{map[string]any{"subnet": podCIDR}}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conflist, "", "  ")
	if err != nil {
		return err
	}
	if string(data) == string(a.conflist) {
		return nil
	}
	temporary := filepath.Join(confDir, "."+confName)
	if err := os.WriteFile(temporary, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(temporary, filepath.Join(confDir, confName)); err != nil {
		return err
	}
	a.conflist = data
	klog.InfoS("CNI configuration written", "podCIDR", podCIDR)
	return nil
}
