package cluster

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Addresses of the real node. They exist only inside the cluster's own network namespace, so
// every cluster can use the same ones and none of them reaches the machine's root namespace.
const (
	RealNodeIP     = "10.244.0.1"
	RealNodeSubnet = "10.244.0.0/24"
	// RealNodeBridge is the pod (CNI) bridge inside the cluster's namespace; the node IP is on
	// it. Its name is outside Berth's bridge prefix ("berth"), so no PodNetwork can name it;
	// the agent would refuse it anyway (it carries no Berth mark).
	RealNodeBridge = "cnibr0"
	// ServiceCIDR is the cluster's Service range (the API server's --service-cluster-ip-range).
	ServiceCIDR = "10.96.0.0/16"
	// ClusterDNSIP is what pods get as nameserver (nothing serves it unless a test deploys DNS).
	ClusterDNSIP = "10.96.0.10"
	// unusedNameserver is the kubelet's resolv.conf for dnsPolicy: Default pods: the node IP,
	// where nothing listens on port 53, so no pod ever asks the machine's real resolver.
	unusedNameserver = RealNodeIP
	kubeletPort      = 10250
	kubeletHealthz   = 10248
	proxyHealthz     = 10256
	proxyMetrics     = 10249
)

// realNodePaths are the files and directories of one real node, all under the cluster Dir.
type realNodePaths struct {
	Root          string // Dir/node
	ContainerdDir string
	Socket        string
	CNIBin        string
	CNIConf       string
	CNIData       string
	Kubelet       string
	PodLogs       string
	VolumePlugins string
	ResolvConf    string
}

func newRealNodePaths(dir string) realNodePaths {
	root := dir + "/node"
	return realNodePaths{
		Root:          root,
		ContainerdDir: root + "/containerd",
		Socket:        root + "/containerd/containerd.sock",
		CNIBin:        root + "/cni/bin",
		CNIConf:       root + "/cni/net.d",
		CNIData:       root + "/cni/ipam",
		Kubelet:       root + "/kubelet",
		PodLogs:       root + "/pod-logs",
		VolumePlugins: root + "/volume-plugins",
		ResolvConf:    root + "/resolv.conf",
	}
}

// containerdConfig renders containerd's configuration: every directory under the node's own
// root, CNI from the node's bin and conf dirs, and the imported pause image as sandbox image.
func containerdConfig(p realNodePaths, pauseRef string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[plugins."io.containerd.grpc.v1.cri"]
  # Pod network namespaces are bind-mounted under the state dir, not /var/run/netns.
  netns_mounts_under_state_dir = true
  # This machine's root lacks CAP_SYS_RESOURCE: lowering oom_score_adj (the -998 sandboxes ask
  # for) fails inside runc. Clamping to containerd's own score avoids it; harmless elsewhere.
  restrict_oom_score_adj = true
  sandbox_image = %[4]q
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[5]q
    conf_dir = %[6]q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %[7]q
        # cgroupfs, matching the kubelet's cgroupDriver.
        SystemdCgroup = false

[plugins."io.containerd.internal.v1.opt"]
  path = %[8]q
`, p.ContainerdDir+"/root", p.ContainerdDir+"/state", p.Socket, pauseRef, p.CNIBin, p.CNIConf,
		p.ContainerdDir+"/runc", p.ContainerdDir+"/opt")
}

// cniConfig renders the pod network: Debian's bridge plugin on the node's bridge with no
// gateway mode and no masquerading (no NAT, nothing switches on forwarding by itself), IPs from
// host-local, and portmap for hostPort.
func cniConfig(network string, p realNodePaths) (string, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       network,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": RealNodeBridge,
				"isGateway": false, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": p.CNIData,
					"ranges": []any{[]any{map[string]any{
						"subnet": RealNodeSubnet, "rangeStart": "10.244.0.10", "gateway": RealNodeIP,
					}}},
					"routes": []any{map[string]any{"dst": "0.0.0.0/0", "gw": RealNodeIP}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	return string(b), err
}

// kubeletConfig renders the KubeletConfiguration of the real node.
func kubeletConfig(p realNodePaths, caFile, cgroupRoot string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
containerRuntimeEndpoint: unix://%[4]s
# No systemd here, and containerd 1.6 cannot report its driver: the kubelet uses this one.
cgroupDriver: cgroupfs
# Pods go under a cgroup of this cluster's own, so clusters and their teardown never collide.
cgroupRoot: %[5]s
# kubelet 1.37 refuses cgroup v1 hosts (like this one) unless told otherwise.
failCgroupV1: false
failSwapOn: false
podLogsDir: %[6]s
volumePluginDir: %[7]s
resolvConf: %[8]s
clusterDNS: [%[9]s]
clusterDomain: cluster.local
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[10]s}
authorization: {mode: Webhook}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
# The imported images cannot be pulled again: never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
`, RealNodeIP, kubeletPort, kubeletHealthz, p.Socket, cgroupRoot, p.PodLogs, p.VolumePlugins, p.ResolvConf,
		ClusterDNSIP, caFile)
}

// kubeProxyConfig renders kube-proxy's configuration: iptables mode (rules live in the
// cluster's namespace), node ports only on the bridge subnet, no localhost node ports (so no
// route_localnet), and no conntrack table sizing (a host-wide setting).
func kubeProxyConfig(kubeconfig, nodeName string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: [%q]
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0, min: 0}
`, kubeconfig, nodeName, RealNodeSubnet, proxyHealthz, proxyMetrics, RealNodeSubnet)
}

func resolvConf() string { return "nameserver " + unusedNameserver + "\n" }

// validNodeName is the DNS-1123 subdomain check the apiserver applies to node names.
func validNodeName(n string) bool {
	if n == "" || len(n) > 253 || strings.Trim(n, "-.") != n {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
