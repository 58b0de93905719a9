package cluster

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Addresses of the real nodes. They exist only inside the cluster's network namespaces, so
// every cluster can use the same ones and none of them reaches the machine's root namespace.
// RealNodeIP and RealNodeSubnet are the first node's (the cluster namespace's); node i (from
// 0) has 10.244.i.1 on 10.244.i.0/24 (see nodeAddrs).
const (
	RealNodeIP     = "10.244.0.1"
	RealNodeSubnet = "10.244.0.0/24"
	// RealPodCIDR covers every real node's pod subnet (KWOK's simulated pods use SimulatedPodCIDR).
	RealPodCIDR = "10.244.0.0/17"
	// SimulatedPodCIDR is where KWOK gives simulated pods their addresses, and every simulated
	// node's spec.podCIDR: KWOK keys its address pools by the CIDR's text, so nodes naming the
	// same range share KWOK's one pool, exactly as without a podCIDR. Why not a range per node:
	// make bench-scale runs 5000 simulated nodes, and /24s of this /17 would last 128.
	SimulatedPodCIDR = "10.244.128.0/17"
	// RealNodeBridge is the pod (CNI) bridge inside each node's namespace; the node IP is on
	// it. Its name is outside Berth's bridge prefix ("berth"), so no PodNetwork can name it;
	// the agent would refuse it anyway (it carries no Berth mark).
	RealNodeBridge = "cnibr0"
	// NodeLinkBridge joins the nodes: a bridge in the cluster namespace (the first node's)
	// with NodeLinkIP, where every other node's uplink (NodeUplink, a veth) is a port. It
	// exists only when the cluster runs more than one real node.
	NodeLinkBridge = "nodebr0"
	NodeLinkSubnet = "10.243.0.0/24"
	// NodeUplink is the name of a node's link to NodeLinkBridge inside its own namespace.
	NodeUplink = "eth0"
	// MaxRealNodes bounds RealNodeConfig.Count (each node is a containerd, a kubelet and a
	// kube-proxy: more than a few do not fit a small machine, and the subnets must stay below
	// KWOK's).
	MaxRealNodes = 8
	// ServiceCIDR is the cluster's Service range (the API server's --service-cluster-ip-range).
	ServiceCIDR = "10.96.0.0/16"
	// ClusterDNSIP is what pods get as nameserver (nothing serves it unless a test deploys DNS).
	ClusterDNSIP   = "10.96.0.10"
	kubeletPort    = 10250
	kubeletHealthz = 10248
	proxyHealthz   = 10256
	proxyMetrics   = 10249
)

// nodeAddr is where node i (from 0) sits on the cluster's private network.
type nodeAddr struct {
	IP      string // the node IP, on its pod bridge
	Subnet  string // its pod subnet
	First   string // the first address IPAM hands out
	LinkIP  string // its address on NodeLinkBridge (the first node's is the bridge's own)
	LinkDev string // where that address lives in the node's namespace
}

func nodeAddrs(i int) nodeAddr {
	a := nodeAddr{IP: fmt.Sprintf("10.244.%d.1", i), Subnet: fmt.Sprintf("10.244.%d.0/24", i),
		First: fmt.Sprintf("10.244.%d.10", i), LinkIP: fmt.Sprintf("10.243.0.%d", i+1), LinkDev: NodeUplink}
	if i == 0 {
		a.LinkDev = NodeLinkBridge
	}
	return a
}

// realNodePaths are the files and directories of one real node, all under the cluster Dir.
type realNodePaths struct {
	Root          string // Dir/node (the first node) or Dir/n<i>
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

func newRealNodePaths(dir string) realNodePaths { return newNodePaths(dir + "/node") }

// CRISocketTemplate is agent.criSocket for a chart installed on the cluster in dir: every real
// node's containerd listens at dir/cri/<node name>/containerd.sock, and the chart mounts
// dir/cri with the node's own subdirectory per pod.
func CRISocketTemplate(dir string) string { return criSocket(dir, "$(NODE_NAME)") }

// criSocket is node's containerd socket. Short: containerd's ttrpc socket beside it must stay
// under 104 bytes.
func criSocket(dir, node string) string { return filepath.Join(dir, "cri", node, "containerd.sock") }

func newNodePaths(root string) realNodePaths {
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
func cniConfig(network string, p realNodePaths, a nodeAddr) (string, error) {
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
						"subnet": a.Subnet, "rangeStart": a.First, "gateway": a.IP,
					}}},
					"routes": []any{map[string]any{"dst": "0.0.0.0/0", "gw": a.IP}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	return string(b), err
}

// kubeletConfig renders the KubeletConfiguration of the real node.
func kubeletConfig(p realNodePaths, a nodeAddr, caFile, cgroupRoot string) string {
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
`, a.IP, kubeletPort, kubeletHealthz, p.Socket, cgroupRoot, p.PodLogs, p.VolumePlugins, p.ResolvConf,
		ClusterDNSIP, caFile)
}

// kubeProxyConfig renders kube-proxy's configuration: iptables mode (rules live in the
// node's namespace), node ports only on the node's bridge subnet, no localhost node ports (so
// no route_localnet), and no conntrack table sizing (a host-wide setting).
func kubeProxyConfig(kubeconfig, nodeName string, a nodeAddr) string {
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
`, kubeconfig, nodeName, RealPodCIDR, proxyHealthz, proxyMetrics, a.Subnet)
}

// resolvConf is the kubelet's resolv.conf for dnsPolicy: Default pods: the node IP, where
// nothing listens on port 53, so no pod ever asks the machine's real resolver.
func resolvConf(a nodeAddr) string { return "nameserver " + a.IP + "\n" }

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
