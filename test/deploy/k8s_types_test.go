package deploy

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The subset of the Kubernetes API the tests look at. Decoding is lenient:
// fields not listed here are ignored, not rejected.

type objectMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type k8sObject struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   objectMeta        `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	Spec       yaml.Node         `yaml:"spec"`

	file string // relative to deploy/
}

func (o k8sObject) String() string { return fmt.Sprintf("%s %s/%s", o.file, o.Kind, o.Metadata.Name) }

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type podTemplate struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     podSpec    `yaml:"spec"`
}

type workloadSpec struct {
	Replicas             *int          `yaml:"replicas"`
	ServiceName          string        `yaml:"serviceName"`
	PodManagementPolicy  string        `yaml:"podManagementPolicy"`
	Selector             labelSelector `yaml:"selector"`
	Template             podTemplate   `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata objectMeta `yaml:"metadata"`
		Spec     struct {
			AccessModes []string `yaml:"accessModes"`
			Resources   struct {
				Requests map[string]string `yaml:"requests"`
			} `yaml:"resources"`
		} `yaml:"spec"`
	} `yaml:"volumeClaimTemplates"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		EmptyDir yaml.Node `yaml:"emptyDir"`
	} `yaml:"volumes"`
}

type container struct {
	Name          string   `yaml:"name"`
	Image         string   `yaml:"image"`
	Command       []string `yaml:"command"`
	Args          []string `yaml:"args"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Env           []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	StartupProbe   *probe `yaml:"startupProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		RunAsUser                *int  `yaml:"runAsUser"`
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
}

type serviceSpec struct {
	ClusterIP                string            `yaml:"clusterIP"`
	PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string `yaml:"selector"`
	Ports                    []servicePort     `yaml:"ports"`
}

type servicePort struct {
	Name       string    `yaml:"name"`
	Port       int       `yaml:"port"`
	TargetPort yaml.Node `yaml:"targetPort"`
}

type pdbSpec struct {
	MaxUnavailable yaml.Node     `yaml:"maxUnavailable"`
	MinAvailable   yaml.Node     `yaml:"minAvailable"`
	Selector       labelSelector `yaml:"selector"`
}

// k8sObjects decodes every document of every manifest in deploy/k8s except
// the kustomization.
func k8sObjects(t *testing.T) []k8sObject {
	t.Helper()
	var out []k8sObject
	for _, f := range yamlFiles(t) {
		if !strings.HasPrefix(f, "k8s/") || path.Base(f) == "kustomization.yaml" {
			continue
		}
		docs, err := yamlDocs(readDeploy(t, f))
		require.NoError(t, err, f)
		for i, d := range docs {
			var o k8sObject
			require.NoError(t, d.Decode(&o), "%s document %d", f, i+1)
			o.file = f
			out = append(out, o)
		}
	}
	require.NotEmpty(t, out, "no manifests under deploy/k8s")
	return out
}

func ofKind(objs []k8sObject, kind string) []k8sObject {
	var out []k8sObject
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func find(objs []k8sObject, kind, name string) (k8sObject, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return k8sObject{}, false
}

func decodeSpec[T any](t *testing.T, o k8sObject) T {
	t.Helper()
	var v T
	require.NoError(t, o.Spec.Decode(&v), "%s: spec", o)
	return v
}

// workloads are the objects with a pod template.
func workloads(t *testing.T, objs []k8sObject) map[string]workloadSpec {
	t.Helper()
	out := map[string]workloadSpec{}
	for _, o := range objs {
		switch o.Kind {
		case "StatefulSet", "Deployment", "DaemonSet", "Job":
			out[o.String()] = decodeSpec[workloadSpec](t, o)
		}
	}
	return out
}

// selects reports whether selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// isFencepostImage reports whether a container runs the fencepost image.
// isCaptureStep reports whether c is the capture init step (fencepost
// capture, README "Closing the bypass"): the one container that changes
// the pod's nat table, so it runs as root with NET_ADMIN and NET_RAW.
func isCaptureStep(c container) bool {
	return isFencepostImage(c.Image) && len(c.Args) > 0 && c.Args[0] == "capture"
}

func isFencepostImage(image string) bool {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return path.Base(name) == "fencepost"
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podEnv computes a container's environment the way the kubelet does:
// fieldRefs from the simulated pod, then $(VAR) references to variables
// defined earlier in the list. A reference to an undefined variable stays
// as it is (as in Kubernetes).
func podEnv(t *testing.T, where string, c container, pod map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v, ok := pod[e.ValueFrom.FieldRef.FieldPath]
			require.True(t, ok, "%s: env %s: fieldRef %s is not simulated by the test", where, e.Name, e.ValueFrom.FieldRef.FieldPath)
			env[e.Name] = v
		case e.ValueFrom != nil:
			t.Fatalf("%s: env %s: only fieldRef sources are simulated", where, e.Name)
		default:
			env[e.Name] = expand(e.Value, env)
		}
	}
	return env
}

// expand replaces $(VAR) references with values from env.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// simulatedPod is a pod of a workload: its name, IP and namespace, as the
// downward API would report them.
func simulatedPod(kind, name string, ordinal int) map[string]string {
	pod := name + "-" + strconv.Itoa(ordinal)
	if kind != "StatefulSet" {
		pod = fmt.Sprintf("%s-5d8f7c9b4-x%dq2z", name, ordinal)
	}
	return map[string]string{
		"metadata.name":      pod,
		"metadata.namespace": "fencepost-test",
		"status.podIP":       fmt.Sprintf("10.42.0.%d", 10+ordinal),
		"spec.nodeName":      "node-a",
	}
}

// mountedFiles returns the ConfigMap files a container sees, by path.
func mountedFiles(t *testing.T, objs []k8sObject, spec podSpec, c container, where string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm, ok := find(objs, "ConfigMap", v.ConfigMap.Name)
			require.True(t, ok, "%s: volume %s: ConfigMap %s is not in deploy/k8s", where, v.Name, v.ConfigMap.Name)
			for k, text := range cm.Data {
				files[path.Join(m.MountPath, k)] = text
			}
		}
	}
	return files
}

// intOrName returns a port given as a number or a name.
func intOrName(n yaml.Node) string { return n.Value }
