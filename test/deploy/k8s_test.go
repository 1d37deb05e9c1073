package deploy

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/config"
)

// apiVersions are the kinds deploy/k8s may use and their stable API groups.
var apiVersions = map[string]string{
	"ConfigMap":           "v1",
	"Service":             "v1",
	"StatefulSet":         "apps/v1",
	"Deployment":          "apps/v1",
	"PodDisruptionBudget": "policy/v1",
	"NetworkPolicy":       "networking.k8s.io/v1",
	"ServiceAccount":      "v1",
}

func TestK8sManifestsWellFormed(t *testing.T) {
	seen := map[string]string{}
	for _, o := range k8sObjects(t) {
		want, ok := apiVersions[o.Kind]
		require.True(t, ok, "%s: kind %q is not one the tests know", o, o.Kind)
		require.Equal(t, want, o.APIVersion, "%s: apiVersion", o)
		require.NotEmpty(t, o.Metadata.Name, "%s: metadata.name", o)
		require.NotEmpty(t, o.Metadata.Labels["app.kubernetes.io/name"], "%s: label app.kubernetes.io/name", o)
		key := o.Kind + "/" + o.Metadata.Name
		require.Empty(t, seen[key], "%s: also defined in %s", o, seen[key])
		seen[key] = o.file
	}
}

func TestK8sKustomizationListsEveryManifest(t *testing.T) {
	var k struct {
		Resources []string `yaml:"resources"`
	}
	decodeYAML(t, &k, "k8s", "kustomization.yaml")
	var want []string
	for _, f := range yamlFiles(t) {
		if strings.HasPrefix(f, "k8s/") && path.Base(f) != "kustomization.yaml" {
			want = append(want, strings.TrimPrefix(f, "k8s/"))
		}
	}
	got := slices.Clone(k.Resources)
	slices.Sort(got)
	require.Equal(t, want, got, "k8s/kustomization.yaml resources must list every manifest in deploy/k8s")
}

func TestK8sServicesSelectPods(t *testing.T) {
	objs := k8sObjects(t)
	wls := workloads(t, objs)
	for name, wl := range wls {
		require.True(t, selects(wl.Selector.MatchLabels, wl.Template.Metadata.Labels), "%s: selector does not match its own pod template", name)
	}
	for _, svc := range ofKind(objs, "Service") {
		spec := decodeSpec[serviceSpec](t, svc)
		var matched []string
		for name, wl := range wls {
			if !selects(spec.Selector, wl.Template.Metadata.Labels) {
				continue
			}
			matched = append(matched, name)
			for _, p := range spec.Ports {
				target := intOrName(p.TargetPort)
				if target == "" {
					target = strconv.Itoa(p.Port)
				}
				require.True(t, podHasPort(wl.Template.Spec, target), "%s: port %s targets %q, which %s does not declare", svc, p.Name, target, name)
			}
		}
		require.NotEmpty(t, matched, "%s: selector %v matches no pod template", svc, spec.Selector)
	}
}

func podHasPort(spec podSpec, target string) bool {
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, p := range c.Ports {
			if p.Name == target || strconv.Itoa(p.ContainerPort) == target {
				return true
			}
		}
	}
	return false
}

func containerPort(t *testing.T, c container, name string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s declares no port named %q", c.Name, name)
	return 0
}

func TestK8sContainersHardened(t *testing.T) {
	for name, wl := range workloads(t, k8sObjects(t)) {
		spec := wl.Template.Spec
		require.NotNil(t, spec.SecurityContext.RunAsNonRoot, "%s: pod securityContext.runAsNonRoot", name)
		require.True(t, *spec.SecurityContext.RunAsNonRoot, "%s: pod securityContext.runAsNonRoot", name)
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			where := name + " container " + c.Name
			require.NotEmpty(t, c.Resources.Requests["cpu"], "%s: resources.requests.cpu", where)
			require.NotEmpty(t, c.Resources.Requests["memory"], "%s: resources.requests.memory", where)
			require.NotEmpty(t, c.Resources.Limits["memory"], "%s: resources.limits.memory", where)
			sc := c.SecurityContext
			require.True(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation: false", where)
			require.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem: true", where)
			require.Contains(t, sc.Capabilities.Drop, "ALL", "%s: capabilities.drop: [ALL]", where)
			if isCaptureStep(c) {
				// iptables needs root in the container and these two
				// capabilities (Kubernetes gives a non-root container no
				// effective capabilities); it adds nothing else, and it runs
				// to completion before the sidecar and the worker start.
				require.ElementsMatch(t, []string{"NET_ADMIN", "NET_RAW"}, sc.Capabilities.Add, "%s: capabilities.add", where)
				require.True(t, slices.ContainsFunc(spec.InitContainers, func(ic container) bool { return ic.Name == c.Name }) && c.RestartPolicy == "",
					"%s: the capture step is a plain init container (it exits before the others start)", where)
				require.Equal(t, spec.InitContainers[0].Name, c.Name, "%s: the capture step is the first init container", where)
				require.Empty(t, c.Command, "%s: use the image's ENTRYPOINT; put the subcommand in args", where)
				continue
			}
			require.Empty(t, sc.Capabilities.Add, "%s: no capabilities added", where)
			// A numeric uid lets the kubelet verify runAsNonRoot whatever
			// the image's USER says.
			uid := sc.RunAsUser
			if uid == nil {
				uid = spec.SecurityContext.RunAsUser
			}
			require.True(t, uid != nil && *uid != 0, "%s: set a numeric non-root runAsUser (65532 for the fencepost image)", where)
			if isFencepostImage(c.Image) {
				require.Equal(t, 65532, *uid, "%s: the fencepost image's nonroot user owns /var/lib/fencepost", where)
				require.Empty(t, c.Command, "%s: use the image's ENTRYPOINT; put the subcommand in args", where)
			}
		}
	}
}

// serverSet is the StatefulSet running `fencepost server`.
type serverSet struct {
	obj       k8sObject
	spec      workloadSpec
	c         container
	headless  string // Service name for the pods' DNS names
	httpPort  int
	raftPort  int
	replicas  int
	clientSvc map[string]int // client Services selecting the servers: name -> port of "http"
}

func findServerSet(t *testing.T, objs []k8sObject) serverSet {
	t.Helper()
	for _, o := range ofKind(objs, "StatefulSet") {
		spec := decodeSpec[workloadSpec](t, o)
		for _, c := range spec.Template.Spec.Containers {
			if isFencepostImage(c.Image) && len(c.Args) > 0 && c.Args[0] == "server" {
				s := serverSet{obj: o, spec: spec, c: c, headless: spec.ServiceName, clientSvc: map[string]int{}}
				s.httpPort = containerPort(t, c, "http")
				s.raftPort = containerPort(t, c, "raft")
				require.NotNil(t, spec.Replicas, "%s: replicas", o)
				s.replicas = *spec.Replicas
				for _, svc := range ofKind(objs, "Service") {
					ss := decodeSpec[serviceSpec](t, svc)
					if svc.Metadata.Name == s.headless || !selects(ss.Selector, spec.Template.Metadata.Labels) {
						continue
					}
					for _, p := range ss.Ports {
						if intOrName(p.TargetPort) == "http" || intOrName(p.TargetPort) == strconv.Itoa(s.httpPort) {
							s.clientSvc[svc.Metadata.Name] = p.Port
						}
					}
				}
				return s
			}
		}
	}
	t.Fatal("no StatefulSet in deploy/k8s runs `fencepost server`")
	return serverSet{}
}

// podDNS is the name of server pod i under the headless Service.
func (s serverSet) podDNS(i int) string {
	return fmt.Sprintf("%s-%d.%s", s.obj.Metadata.Name, i, s.headless)
}

func TestK8sServerStatefulSet(t *testing.T) {
	objs := k8sObjects(t)
	s := findServerSet(t, objs)
	require.Equal(t, 3, s.replicas, "%s: a 3-node cluster", s.obj)
	require.Equal(t, "Parallel", s.spec.PodManagementPolicy,
		"%s: with OrderedReady a full restart deadlocks (pod 0 is ready only once a quorum is back)", s.obj)

	headless, ok := find(objs, "Service", s.headless)
	require.True(t, ok, "%s: serviceName %q is not a Service in deploy/k8s", s.obj, s.headless)
	hs := decodeSpec[serviceSpec](t, headless)
	require.Equal(t, "None", hs.ClusterIP, "%s: must be headless", headless)
	require.True(t, hs.PublishNotReadyAddresses, "%s: publishNotReadyAddresses, so members can reach a node before it has a leader", headless)
	require.NotEmpty(t, s.clientSvc, "no client Service in front of %s", s.obj)

	require.NotNil(t, s.c.ReadinessProbe, "server readinessProbe")
	require.NotNil(t, s.c.ReadinessProbe.HTTPGet, "server readinessProbe.httpGet")
	require.Equal(t, "/readyz", s.c.ReadinessProbe.HTTPGet.Path)
	require.NotNil(t, s.c.LivenessProbe, "server livenessProbe")
	require.NotNil(t, s.c.LivenessProbe.HTTPGet, "server livenessProbe.httpGet")
	require.Equal(t, "/healthz", s.c.LivenessProbe.HTTPGet.Path)
	for _, p := range []*probe{s.c.ReadinessProbe, s.c.LivenessProbe} {
		port := intOrName(p.HTTPGet.Port)
		require.True(t, port == "http" || port == strconv.Itoa(s.httpPort), "probe port %q must be the API port", port)
	}

	require.Len(t, s.spec.VolumeClaimTemplates, 1, "%s: one PVC per pod", s.obj)
	pvc := s.spec.VolumeClaimTemplates[0]
	require.NotEmpty(t, pvc.Spec.Resources.Requests["storage"], "%s: PVC storage request", s.obj)
	dataMount := ""
	for _, m := range s.c.VolumeMounts {
		if m.Name == pvc.Metadata.Name {
			dataMount = m.MountPath
		}
	}
	require.NotEmpty(t, dataMount, "%s: the PVC %q is not mounted", s.obj, pvc.Metadata.Name)

	var pdbs int
	for _, o := range ofKind(objs, "PodDisruptionBudget") {
		spec := decodeSpec[pdbSpec](t, o)
		if !selects(spec.Selector.MatchLabels, s.spec.Template.Metadata.Labels) {
			continue
		}
		pdbs++
		require.NotZero(t, spec.MaxUnavailable.Kind, "%s: maxUnavailable", o)
		require.Equal(t, "1", spec.MaxUnavailable.Value, "%s: a 3-node cluster survives one voluntary disruption", o)
	}
	require.Equal(t, 1, pdbs, "want exactly one PodDisruptionBudget for %s", s.obj)

	// Each pod's effective configuration.
	used := map[string]bool{}
	bootstrappers := 0
	for i := range s.replicas {
		pod := simulatedPod("StatefulSet", s.obj.Metadata.Name, i)
		where := fmt.Sprintf("%s pod %s", s.obj, pod["metadata.name"])
		env := podEnv(t, where, s.c, pod)
		files := mountedFiles(t, objs, s.spec.Template.Spec, s.c, where)
		args := make([]string, len(s.c.Args))
		for j, a := range s.c.Args {
			args[j] = expand(a, env)
		}
		for _, a := range args {
			if _, ok := files[a]; ok {
				used[a] = true
			}
		}
		l := checkLaunch(t, launch{where: where, args: args, env: env, files: files})
		cfg, ok := l.cfg.(*config.Server)
		require.True(t, ok, "%s: runs %s, not server", where, l.role)

		require.Equal(t, pod["metadata.name"], cfg.NodeID, "%s: node_id must be the stable pod name", where)
		require.Equal(t, strconv.Itoa(s.httpPort), portOf(cfg.HTTPAddr), "%s: http_addr port vs containerPort http", where)
		require.Equal(t, strconv.Itoa(s.raftPort), portOf(cfg.RaftAddr), "%s: raft_addr port vs containerPort raft", where)
		require.Equal(t, net.JoinHostPort(s.podDNS(i), strconv.Itoa(s.httpPort)), cfg.HTTPAdvertise,
			"%s: http_advertise is what other members forward to: the pod's stable DNS name", where)
		raftHost := hostOf(cfg.RaftAdvertise)
		require.Contains(t, []string{pod["status.podIP"], s.podDNS(i)}, raftHost, "%s: raft_advertise must be this pod's IP or DNS name", where)
		require.Equal(t, strconv.Itoa(s.raftPort), portOf(cfg.RaftAdvertise), "%s: raft_advertise port", where)
		require.True(t, strings.HasPrefix(cfg.DataDir+"/", dataMount+"/"), "%s: data_dir %s is not on the PVC mounted at %s", where, cfg.DataDir, dataMount)

		if cfg.ShouldBootstrap() {
			bootstrappers++
			require.Equal(t, 0, i, "%s: only pod 0 may bootstrap", where)
			require.Empty(t, cfg.Join, "%s", where)
			continue
		}
		require.NotEmpty(t, cfg.Join, "%s: a non-bootstrapping node must join", where)
		for _, ep := range cfg.Join {
			ok := false
			for j := range s.replicas {
				if j != i && ep == net.JoinHostPort(s.podDNS(j), strconv.Itoa(s.httpPort)) {
					ok = true
				}
			}
			require.True(t, ok, "%s: join endpoint %q is not another member's %s-N.%s:%d", where, ep, s.obj.Metadata.Name, s.headless, s.httpPort)
		}
	}
	require.Equal(t, 1, bootstrappers, "exactly one server pod bootstraps")
	files := mountedFiles(t, objs, s.spec.Template.Spec, s.c, s.obj.String())
	for p := range files {
		require.True(t, used[p], "%s: %s is mounted but no pod reads it", s.obj, p)
	}
}

// TestK8sFencepostContainers checks every container running the fencepost
// image (servers too, from the generic angle), for each simulated pod.
func TestK8sFencepostContainers(t *testing.T) {
	objs := k8sObjects(t)
	servers := findServerSet(t, objs)
	var count int
	for _, o := range objs {
		if o.Kind != "StatefulSet" && o.Kind != "Deployment" {
			continue
		}
		spec := decodeSpec[workloadSpec](t, o)
		replicas := 1
		if spec.Replicas != nil {
			replicas = min(*spec.Replicas, 3)
		}
		pod := spec.Template.Spec
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			if !isFencepostImage(c.Image) {
				continue
			}
			count++
			for i := range replicas {
				sim := simulatedPod(o.Kind, o.Metadata.Name, i)
				where := fmt.Sprintf("%s pod %s container %s", o, sim["metadata.name"], c.Name)
				env := podEnv(t, where, c, sim)
				args := make([]string, len(c.Args))
				for j, a := range c.Args {
					args[j] = expand(a, env)
				}
				l := checkLaunch(t, launch{where: where, args: args, env: env, files: mountedFiles(t, objs, pod, c, where)})
				switch cfg := l.cfg.(type) {
				case *config.Sidecar:
					if isCaptureStep(c) {
						checkK8sCapture(t, where, pod, cfg)
						continue
					}
					checkK8sSidecar(t, where, servers, pod, c, cfg)
				case *config.Fenced:
					checkK8sFenced(t, where, objs, c, cfg)
				}
			}
		}
	}
	require.NotZero(t, count, "no container in deploy/k8s runs the fencepost image")
}

// checkK8sCapture: the capture step reads the sidecar's own file, so the
// rules redirect to the sidecar's capture listener and exclude the uid the
// sidecar really runs as.
func checkK8sCapture(t *testing.T, where string, pod podSpec, cfg *config.Sidecar) {
	t.Helper()
	require.NotEmpty(t, cfg.Capture.Listen, "%s: capture.listen must be set (the port the rules redirect to)", where)
	for _, c := range pod.InitContainers {
		if c.RestartPolicy == "Always" && isFencepostImage(c.Image) && len(c.Args) > 0 && c.Args[0] == "sidecar" {
			uid := c.SecurityContext.RunAsUser
			if uid == nil {
				uid = pod.SecurityContext.RunAsUser
			}
			require.NotNil(t, uid, "%s: the sidecar's runAsUser", where)
			require.Equal(t, *uid, cfg.Capture.SidecarUID, "%s: capture.sidecar_uid must be the uid the sidecar runs as, or its own connections loop back", where)
			return
		}
	}
	t.Fatalf("%s: a capture step without a sidecar in the pod", where)
}

func checkK8sSidecar(t *testing.T, where string, servers serverSet, pod podSpec, c container, cfg *config.Sidecar) {
	t.Helper()
	require.True(t, slices.ContainsFunc(pod.InitContainers, func(ic container) bool { return ic.Name == c.Name }) && c.RestartPolicy == "Always",
		"%s: the sidecar should be a native sidecar (initContainers, restartPolicy: Always) so it starts before and stops after the worker", where)
	for _, ep := range cfg.Cluster {
		host, port := hostOf(ep), portOf(ep)
		ok := false
		if port == strconv.Itoa(servers.httpPort) {
			for i := range servers.replicas {
				ok = ok || host == servers.podDNS(i)
			}
		}
		if p, isSvc := servers.clientSvc[host]; isSvc && strconv.Itoa(p) == port {
			ok = true
		}
		require.True(t, ok, "%s: cluster endpoint %q is neither a server pod's DNS name nor a client Service port", where, ep)
	}
	require.NotNil(t, pod.TerminationGracePeriodSeconds, "%s: terminationGracePeriodSeconds", where)
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	require.Less(t, cfg.DrainTimeout.Std(), grace, "%s: drain_timeout must end inside terminationGracePeriodSeconds", where)

	// The other containers of the pod are the worker(s): their proxy
	// settings must point at this sidecar.
	workers := 0
	for _, w := range pod.Containers {
		if isFencepostImage(w.Image) {
			continue
		}
		workers++
		env := map[string]string{}
		for _, e := range w.Env {
			env[e.Name] = e.Value
		}
		for _, name := range []string{"HTTP_PROXY", "http_proxy"} {
			v := env[name]
			require.NotEmpty(t, v, "%s: worker container %s has no %s", where, w.Name, name)
			require.Equal(t, portOf(cfg.ProxyAddr), portOf(v), "%s: worker %s=%s vs sidecar proxy_addr %s", where, name, v, cfg.ProxyAddr)
			require.Contains(t, []string{"127.0.0.1", "localhost", "::1"}, hostOf(v), "%s: worker %s must be loopback", where, name)
		}
		for _, name := range []string{"NO_PROXY", "no_proxy"} {
			checkNoProxy(t, where+" worker "+w.Name, name, env[name])
		}
		if len(cfg.Intercept.Hosts) > 0 {
			bundle := podVolumePath(c, cfg.Intercept.BundleFile)
			require.NotEmpty(t, bundle.volume, "%s: intercept.bundle_file %s is not on a volume the worker can mount", where, cfg.Intercept.BundleFile)
			checkHTTPSEnv(t, where+" worker "+w.Name, env, cfg.ProxyAddr, func(p string) bool { return podVolumePath(w, p) == bundle })
		}
	}
	require.NotZero(t, workers, "%s: a sidecar with no worker beside it", where)
}

func checkK8sFenced(t *testing.T, where string, objs []k8sObject, c container, cfg *config.Fenced) {
	t.Helper()
	require.Equal(t, strconv.Itoa(containerPort(t, c, "http")), portOf(cfg.Addr), "%s: addr port vs containerPort http", where)
	if cfg.KeysFrom == "" {
		return
	}
	svc, ok := find(objs, "Service", hostOf(cfg.KeysFrom))
	require.True(t, ok, "%s: keys_from %q does not name a Service in deploy/k8s", where, cfg.KeysFrom)
	spec := decodeSpec[serviceSpec](t, svc)
	require.True(t, slices.ContainsFunc(spec.Ports, func(p servicePort) bool { return strconv.Itoa(p.Port) == portOf(cfg.KeysFrom) }),
		"%s: keys_from port is not a port of %s", where, svc)
}

// TestK8sRaftPortOnlyFromMembers checks that a NetworkPolicy admits the
// raft port of the server pods only from server pods, and keeps the API
// port open.
func TestK8sRaftPortOnlyFromMembers(t *testing.T) {
	objs := k8sObjects(t)
	s := findServerSet(t, objs)
	labels := s.spec.Template.Metadata.Labels
	type policy struct {
		PodSelector labelSelector `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []struct {
			From []struct {
				PodSelector *labelSelector `yaml:"podSelector"`
			} `yaml:"from"`
			Ports []struct {
				Port int `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
	}
	found := false
	for _, o := range ofKind(objs, "NetworkPolicy") {
		p := decodeSpec[policy](t, o)
		if !selects(p.PodSelector.MatchLabels, labels) {
			continue
		}
		found = true
		require.Contains(t, p.PolicyTypes, "Ingress", "%s", o)
		apiOpen := false
		for _, in := range p.Ingress {
			for _, port := range in.Ports {
				switch port.Port {
				case s.raftPort:
					require.NotEmpty(t, in.From, "%s: raft port %d open to everyone", o, s.raftPort)
					for _, f := range in.From {
						require.True(t, f.PodSelector != nil && selects(f.PodSelector.MatchLabels, labels), "%s: raft port admits a peer that is not a server pod", o)
					}
				case s.httpPort:
					apiOpen = apiOpen || len(in.From) == 0
				}
			}
		}
		require.True(t, apiOpen, "%s: the API port %d must stay reachable by sidecars, fenced and Prometheus", o, s.httpPort)
	}
	require.True(t, found, "no NetworkPolicy selects the server pods")
}
