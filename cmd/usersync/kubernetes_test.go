package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/usersync/usersync/repository/repotest"
)

// k8sObject is what the test reads of a Kubernetes manifest: a
// Deployment, a Service or a Job.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Selector yaml.Node `yaml:"selector"` // a Deployment's {matchLabels}, a Service's labels
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds *int           `yaml:"terminationGracePeriodSeconds"`
				Containers                    []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef struct {
				Name     string `yaml:"name"`
				Key      string `yaml:"key"`
				Optional bool   `yaml:"optional"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// k8sSecretValues stand for the Secret's values: values usersync accepts.
var k8sSecretValues = map[string]string{
	"MONGODB_URI":          "mongodb://mongo:27017/?replicaSet=rs0&w=majority",
	"CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"USERSYNC_API_KEYS":    "k8s-api-key-0123456789",
	"USERSYNC_ADMIN_KEYS":  "k8s-admin-key-0123456789",
	"USERSYNC_METRICS_KEY": "k8s-metrics-key-0123456789",
	"CLERK_SECRET_KEY":     "sk_test_k8s",
}

// readManifests decodes every document of deploy/kubernetes/*.yaml.
func readManifests(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no deploy/kubernetes/*.yaml: %v", err)
	}
	var out []k8sObject
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o k8sObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s: a document without a kind or a name", f)
			}
			out = append(out, o)
		}
	}
	return out
}

// TestKubernetes_ManifestsRunUsersyncAsItReadsAndServes: the manifests of
// deploy/kubernetes parse; each container runs a command usersync has,
// with variables it reads for that command and accepts (the Secret's
// values standing in), its secrets from the Secret usersync; the
// Deployment serves the MongoDB store on the ports its addresses name,
// probes /healthz and /readyz where usersync serves them, and gives a
// stop longer than usersync's; each Service selects its pods and targets
// a port they have.
func TestKubernetes_ManifestsRunUsersyncAsItReadsAndServes(t *testing.T) {
	t.Parallel()
	objs := readManifests(t)
	var deployment *k8sObject
	var services []k8sObject
	for i, o := range objs {
		switch o.Kind {
		case "Deployment":
			deployment = &objs[i]
		case "Service":
			services = append(services, o)
		}
		for _, c := range o.Spec.Template.Spec.Containers {
			checkContainer(t, o, c)
		}
	}
	if deployment == nil || len(services) == 0 {
		t.Fatalf("want a Deployment and a Service; have %d objects", len(objs))
	}
	if len(deployment.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want usersync's", len(deployment.Spec.Template.Spec.Containers))
	}
	c := deployment.Spec.Template.Spec.Containers[0]
	podLabels := deployment.Spec.Template.Metadata.Labels
	var sel struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	if err := deployment.Spec.Selector.Decode(&sel); err != nil || len(sel.MatchLabels) == 0 || !within(sel.MatchLabels, podLabels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v (%v)", sel.MatchLabels, podLabels, err)
	}
	if g := deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second <= shutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %d is not longer than usersync's stop (%v)", *g, shutdownTimeout)
	}
	env := containerEnv(c)
	if env["MONGODB_URI"] == "" || !slices.Equal(c.Args, []string{"serve"}) {
		t.Errorf("the Deployment runs %v without MONGODB_URI, want serve on the MongoDB store", c.Args)
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, variable := range map[string]string{"http": "USERSYNC_ADDR", "webhook": "USERSYNC_WEBHOOK_ADDR"} {
		_, port, err := net.SplitHostPort(env[variable])
		if err != nil || port == "" || port != strconv.Itoa(ports[name]) {
			t.Errorf("port %s is %d, but %s is %q", name, ports[name], variable, env[variable])
		}
	}
	// The probes' paths, on the main listener: what usersync serves there.
	base, _, _ := start(t, map[string]string{"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": repotest.DataDir(t)})
	for what, p := range map[string]*k8sProbe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		want := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[what]
		if p == nil || p.HTTPGet.Path != want || p.HTTPGet.Port != "http" {
			t.Errorf("the %s probe is %+v, want %s on port http", what, p, want)
			continue
		}
		req, _ := http.NewRequest(http.MethodGet, base+p.HTTPGet.Path, nil)
		if code, body := send(t, req); code != http.StatusOK {
			t.Errorf("the %s probe's %s answers %d %s", what, p.HTTPGet.Path, code, body)
		}
	}
	targets := map[string]bool{}
	for _, s := range services {
		var labels map[string]string
		if err := s.Spec.Selector.Decode(&labels); err != nil || len(labels) == 0 || !within(labels, podLabels) {
			t.Errorf("Service %s selects %v, not the Deployment's pods %v", s.Metadata.Name, labels, podLabels)
		}
		for _, p := range s.Spec.Ports {
			if _, ok := ports[p.TargetPort]; !ok {
				t.Errorf("Service %s targets port %q, which the pods do not have", s.Metadata.Name, p.TargetPort)
			}
			targets[p.TargetPort] = true
		}
	}
	if !targets["http"] || !targets["webhook"] {
		t.Errorf("the Services target %v, want the API's port and the webhook's", targets)
	}
}

// checkContainer checks one container: its command, and every variable
// it sets, usersync reads for that command and accepts.
func checkContainer(t *testing.T, o k8sObject, c k8sContainer) {
	t.Helper()
	where := o.Kind + " " + o.Metadata.Name
	if len(c.Args) != 1 {
		t.Errorf("%s: args %v, want one command", where, c.Args)
		return
	}
	name := c.Args[0]
	cmd, ok := commands[name]
	if !ok {
		t.Errorf("%s: usersync has no command %q", where, name)
		return
	}
	byEnv := map[string]setting{}
	for _, s := range settings {
		byEnv[s.Env] = s
	}
	for _, e := range c.Env {
		s, ok := byEnv[e.Name]
		switch {
		case !ok:
			t.Errorf("%s: usersync reads no %s", where, e.Name)
		case !s.readBy(name):
			t.Errorf("%s: usersync %s does not read %s", where, name, e.Name)
		}
		if ref := e.ValueFrom; ref != nil && (ref.SecretKeyRef.Name != "usersync" || ref.SecretKeyRef.Key != e.Name) {
			t.Errorf("%s: %s comes from %+v, want the key %s of the Secret usersync", where, e.Name, ref.SecretKeyRef, e.Name)
		}
	}
	env := containerEnv(c)
	fs := flag.NewFlagSet("usersync "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cmd(fs)
	cfg, err := loadConfig(fs, name, nil, func(k string) string { return env[k] })
	if err == nil && name == "serve" {
		err = cfg.requireSecrets()
	}
	if err != nil {
		t.Errorf("%s: usersync %s refuses its environment: %v", where, name, err)
	}
}

// containerEnv is the environment c sets, the Secret's values standing in
// for its references.
func containerEnv(c k8sContainer) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = k8sSecretValues[e.ValueFrom.SecretKeyRef.Key]
		}
	}
	return env
}

// within reports whether every label of sel is one of labels.
func within(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
