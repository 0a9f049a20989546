package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's Kustomization we use; decoded strictly too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

type k8sObjects struct {
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	services    []*corev1.Service
	deployments []*appsv1.Deployment
	cronJobs    []*batchv1.CronJob
	pdbs        []*policyv1.PodDisruptionBudget
	ingresses   []*networkingv1.Ingress
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// splitYAML returns the non-empty documents of a multi-document YAML file.
func splitYAML(b []byte) ([][]byte, error) {
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err == nil && len(probe) == 0 {
			continue // only comments
		}
		docs = append(docs, doc)
	}
}

func checkK8s(r *report, gw *gateway, dir string) {
	// kustomization.yaml: strictly decoded, and it lists exactly the manifests of the directory.
	kb, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		r.fail("kustomization.yaml: %v", err)
		return
	}
	var kust kustomization
	err = yaml.UnmarshalStrict(kb, &kust)
	r.check(err == nil, "kustomization.yaml: strict decode%s", errSuffix(err))
	r.check(kust.APIVersion == "kustomize.config.k8s.io/v1beta1" && kust.Kind == "Kustomization",
		"kustomization.yaml: apiVersion/kind are kustomize.config.k8s.io/v1beta1 Kustomization (got %s %s)", kust.APIVersion, kust.Kind)
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	onDisk := map[string]bool{}
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			onDisk[b] = true
		}
	}
	listed := map[string]bool{}
	for _, res := range kust.Resources {
		listed[res] = true
		r.check(onDisk[res], "kustomization.yaml: resource %s exists", res)
	}
	for f := range onDisk {
		r.check(listed[f], "kustomization.yaml: lists %s", f)
	}

	codecs := serializer.NewCodecFactory(newScheme(), serializer.EnableStrict)
	decoder := codecs.UniversalDeserializer()
	objs := &k8sObjects{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	names := make([]string, 0, len(onDisk))
	for f := range onDisk {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			r.fail("%s: %v", name, err)
			continue
		}
		docs, err := splitYAML(b)
		if err != nil {
			r.fail("%s: not YAML: %v", name, err)
			continue
		}
		for i, doc := range docs {
			where := fmt.Sprintf("%s#%d", name, i+1)
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				r.fail("%s: strict decode into k8s.io/api types: %v", where, err)
				continue
			}
			meta, _ := obj.(metav1.Object)
			where = fmt.Sprintf("%s %s/%s", name, gvk.Kind, meta.GetName())
			r.ok("%s: strict decode (%s)", where, gvk.GroupVersion())
			if gvk.Kind != "Namespace" {
				r.check(kust.Namespace == "" || meta.GetNamespace() == kust.Namespace,
					"%s: namespace %q is the kustomization's %q", where, meta.GetNamespace(), kust.Namespace)
			}
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				objs.configMaps[o.Name] = o
			case *corev1.Secret:
				objs.secrets[o.Name] = o
			case *corev1.Service:
				objs.services = append(objs.services, o)
			case *appsv1.Deployment:
				objs.deployments = append(objs.deployments, o)
			case *batchv1.CronJob:
				objs.cronJobs = append(objs.cronJobs, o)
			case *policyv1.PodDisruptionBudget:
				objs.pdbs = append(objs.pdbs, o)
			case *networkingv1.Ingress:
				objs.ingresses = append(objs.ingresses, o)
			case *corev1.Namespace:
			default:
				r.fail("%s: kind %s is not one this validator knows how to check", where, gvk.Kind)
			}
		}
	}

	for _, cm := range objs.configMaps {
		for k, v := range cm.Data {
			gw.checkEnv(r, "ConfigMap/"+cm.Name, k, v)
		}
	}
	for _, s := range objs.secrets {
		for k := range s.StringData {
			gw.checkEnvName(r, "Secret/"+s.Name, k)
		}
		for k := range s.Data {
			gw.checkEnvName(r, "Secret/"+s.Name, k)
		}
	}

	r.check(len(objs.deployments) > 0, "a gateway Deployment exists")
	for _, d := range objs.deployments {
		where := "Deployment/" + d.Name
		r.check(d.Spec.Replicas != nil && *d.Spec.Replicas >= 2, "%s: at least 2 replicas", where)
		checkSelector(r, where, d.Spec.Selector, d.Spec.Template.Labels)
		checkPod(r, gw, objs, where, &d.Spec.Template.Spec, true)
		for _, pdb := range objs.pdbs {
			if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				ok := pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int &&
					d.Spec.Replicas != nil && pdb.Spec.MinAvailable.IntVal < *d.Spec.Replicas
				ok = ok || pdb.Spec.MaxUnavailable != nil
				r.check(ok, "PodDisruptionBudget/%s: leaves a disruption possible for %s (minAvailable < replicas)", pdb.Name, where)
			}
		}
	}
	for _, c := range objs.cronJobs {
		checkPod(r, gw, objs, "CronJob/"+c.Name, &c.Spec.JobTemplate.Spec.Template.Spec, false)
	}
	for _, pdb := range objs.pdbs {
		r.check(matchesSomeDeployment(objs, pdb.Spec.Selector), "PodDisruptionBudget/%s: selects a Deployment's pods", pdb.Name)
	}
	for _, svc := range objs.services {
		checkService(r, objs, svc)
	}
	for _, ing := range objs.ingresses {
		checkIngress(r, objs, ing)
	}
}

func errSuffix(err error) string {
	if err != nil {
		return ": " + err.Error()
	}
	return ""
}

func checkSelector(r *report, where string, sel *metav1.LabelSelector, podLabels map[string]string) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	r.check(err == nil && !s.Empty() && s.Matches(labels.Set(podLabels)), "%s: selector matches its pod template's labels", where)
}

func matchesSomeDeployment(objs *k8sObjects, sel *metav1.LabelSelector) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return false
	}
	for _, d := range objs.deployments {
		if s.Matches(labels.Set(d.Spec.Template.Labels)) {
			return true
		}
	}
	return false
}

// podEnv is the environment a container sees: its envFrom ConfigMaps/Secrets, then env.
func podEnv(r *report, objs *k8sObjects, where string, c *corev1.Container) map[string]string {
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, ok := objs.configMaps[ef.ConfigMapRef.Name]
			r.check(ok, "%s: envFrom ConfigMap %s exists", where, ef.ConfigMapRef.Name)
			if ok {
				for k, v := range cm.Data {
					env[k] = v
				}
			}
		case ef.SecretRef != nil:
			s, ok := objs.secrets[ef.SecretRef.Name]
			r.check(ok, "%s: envFrom Secret %s exists", where, ef.SecretRef.Name)
			if ok {
				for k, v := range s.StringData {
					env[k] = v
				}
				for k, v := range s.Data {
					env[k] = string(v)
				}
			}
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func checkPod(r *report, gw *gateway, objs *k8sObjects, where string, pod *corev1.PodSpec, serving bool) {
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	volumes := map[string]*corev1.Volume{}
	for i := range pod.Volumes {
		volumes[pod.Volumes[i].Name] = &pod.Volumes[i]
	}
	r.check(len(pod.Containers) > 0, "%s: has containers", where)
	for i := range pod.Containers {
		c := &pod.Containers[i]
		cw := fmt.Sprintf("%s container %s", where, c.Name)
		for _, e := range c.Env {
			gw.checkEnv(r, cw, e.Name, e.Value)
		}
		env := podEnv(r, objs, cw, c)
		if strings.HasPrefix(c.Image, gatewayImage) {
			// Without command or args the image's CMD runs (checked in the Dockerfile).
			if len(c.Command) > 0 {
				r.check(path.Base(c.Command[0]) == "nimbus-gateway", "%s: command runs nimbus-gateway", cw)
				gw.checkArgv(r, cw+" command", append(append([]string{}, c.Command[1:]...), c.Args...))
			} else if len(c.Args) > 0 {
				gw.checkArgv(r, cw+" args", c.Args)
			}
		}

		// Resources.
		lim, req := c.Resources.Limits, c.Resources.Requests
		_, hasCPU := lim[corev1.ResourceCPU]
		memLim, hasMem := lim[corev1.ResourceMemory]
		r.check(hasCPU && hasMem, "%s: resources.limits has cpu and memory", cw)
		_, hasMemReq := req[corev1.ResourceMemory]
		r.check(hasMemReq, "%s: resources.requests has memory", cw)
		if serving {
			if cm, ok := env["NIMBUS_CACHE_MEM"]; ok {
				n, err := parseSize(cm)
				r.check(err == nil, "%s: NIMBUS_CACHE_MEM %q parses%s", cw, cm, errSuffix(err))
				if err == nil && hasMem {
					need := minMemory(n)
					r.check(uint64(memLim.Value()) >= need,
						"%s: memory limit %s >= NIMBUS_CACHE_MEM %s + 100 MiB + %d transfers x 4 MiB (%d MiB)",
						cw, memLim.String(), cm, minTransfers, need/mib)
				}
			} else {
				r.fail("%s: NIMBUS_CACHE_MEM is set (the memory limit is sized from it)", cw)
			}
			checkTrustedProxies(r, cw, env)
		}

		// Security context: the container's settings, else the pod's.
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		r.check(nonRoot, "%s: runAsNonRoot", cw)
		uid := sc.RunAsUser
		if uid == nil {
			uid = psc.RunAsUser
		}
		r.check(uid == nil || *uid != 0, "%s: runAsUser is not 0", cw)
		r.check(sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", cw)
		r.check(sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation false", cw)
		r.check(sc.Privileged == nil || !*sc.Privileged, "%s: not privileged", cw)
		dropAll := false
		if sc.Capabilities != nil {
			for _, cp := range sc.Capabilities.Drop {
				dropAll = dropAll || cp == "ALL"
			}
			r.check(len(sc.Capabilities.Add) == 0, "%s: adds no capabilities", cw)
		}
		r.check(dropAll, "%s: capabilities drop ALL", cw)
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		r.check(seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeRuntimeDefault, "%s: seccompProfile RuntimeDefault", cw)

		// Writable paths under a read-only root: the data dir, the cache dir (serving), /tmp.
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[path.Clean(m.MountPath)] = m
			_, ok := volumes[m.Name]
			r.check(ok, "%s: volume %s of mount %s exists", cw, m.Name, m.MountPath)
		}
		wantDirs := []string{env["NIMBUS_DATA_DIR"], "/tmp"}
		if serving {
			wantDirs = append(wantDirs, env["NIMBUS_CACHE_DIR"])
		}
		for _, d := range wantDirs {
			if d == "" {
				r.fail("%s: NIMBUS_DATA_DIR and NIMBUS_CACHE_DIR are set explicitly", cw)
				continue
			}
			m, ok := mounts[path.Clean(d)]
			r.check(ok && !m.ReadOnly, "%s: %s is a writable volume (the root file system is read-only)", cw, d)
		}
		if serving {
			checkCacheVolume(r, cw, env, mounts, volumes)
		}
		if kf := env["NIMBUS_S3_KEY_FILE"]; kf != "" {
			checkKeyFile(r, objs, cw, kf, mounts, volumes)
		}

		// Probes, on the gateway's real routes and listening port.
		if serving {
			port := listenPort(env["NIMBUS_LISTEN"])
			r.check(port != 0, "%s: NIMBUS_LISTEN %q names a port", cw, env["NIMBUS_LISTEN"])
			checkProbe(r, cw, "readinessProbe", c.ReadinessProbe, gw.readyPath, port, c.Ports)
			checkProbe(r, cw, "livenessProbe", c.LivenessProbe, gw.livePath, port, c.Ports)
			if c.StartupProbe != nil {
				checkProbe(r, cw, "startupProbe", c.StartupProbe, gw.livePath, port, c.Ports)
			}
			if lp := listenPort(env["NIMBUS_S3_LISTEN"]); lp != 0 {
				found := false
				for _, p := range c.Ports {
					found = found || p.ContainerPort == lp
				}
				r.check(found, "%s: NIMBUS_S3_LISTEN port %d is a containerPort", cw, lp)
			}
			grace := int64(30)
			if pod.TerminationGracePeriodSeconds != nil {
				grace = *pod.TerminationGracePeriodSeconds
			}
			pre := int64(0)
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
				pre = c.Lifecycle.PreStop.Sleep.Seconds
			}
			r.check(grace >= pre+25, "%s: terminationGracePeriodSeconds %d covers preStop %d s + the gateway's 20 s drain + margin", cw, grace, pre)
		}
	}
}

func listenPort(addr string) int32 {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return 0
	}
	var p int32
	if _, err := fmt.Sscanf(addr[i+1:], "%d", &p); err != nil || p <= 0 || p > 65535 {
		return 0
	}
	return p
}

func checkProbe(r *report, where, name string, p *corev1.Probe, wantPath string, wantPort int32, ports []corev1.ContainerPort) {
	if p == nil {
		r.fail("%s: has a %s", where, name)
		return
	}
	if p.HTTPGet == nil {
		r.fail("%s: %s is an httpGet probe", where, name)
		return
	}
	r.check(p.HTTPGet.Path == wantPath, "%s: %s path %q is the gateway's %q", where, name, p.HTTPGet.Path, wantPath)
	port := p.HTTPGet.Port
	var num int32
	if port.Type == intstr.Int {
		num = port.IntVal
	} else {
		for _, cp := range ports {
			if cp.Name == port.StrVal {
				num = cp.ContainerPort
			}
		}
	}
	r.check(num == wantPort, "%s: %s port %s is the NIMBUS_LISTEN port %d", where, name, port.String(), wantPort)
}

func checkCacheVolume(r *report, where string, env map[string]string, mounts map[string]corev1.VolumeMount, volumes map[string]*corev1.Volume) {
	cs, ok := env["NIMBUS_CACHE_SIZE"]
	if !ok {
		r.fail("%s: NIMBUS_CACHE_SIZE is set (the cache volume is sized from it)", where)
		return
	}
	size, err := parseSize(cs)
	r.check(err == nil, "%s: NIMBUS_CACHE_SIZE %q parses%s", where, cs, errSuffix(err))
	m, ok := mounts[path.Clean(env["NIMBUS_CACHE_DIR"])]
	if !ok || err != nil {
		return
	}
	v := volumes[m.Name]
	if v == nil {
		return
	}
	var capacity *resource.Quantity
	switch {
	case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
		q := v.Ephemeral.VolumeClaimTemplate.Spec.Resources.Requests[corev1.ResourceStorage]
		capacity = &q
	case v.EmptyDir != nil:
		capacity = v.EmptyDir.SizeLimit
	case v.PersistentVolumeClaim != nil:
		r.fail("%s: the cache volume is per pod (ephemeral or emptyDir), not the shared PVC %s: two gateways never share a cache", where, v.PersistentVolumeClaim.ClaimName)
		return
	}
	r.check(capacity != nil && uint64(capacity.Value()) >= size,
		"%s: cache volume %s holds NIMBUS_CACHE_SIZE %s (capacity %v)", where, v.Name, cs, capacity)
}

func checkKeyFile(r *report, objs *k8sObjects, where, file string, mounts map[string]corev1.VolumeMount, volumes map[string]*corev1.Volume) {
	m, ok := mounts[path.Dir(file)]
	if !ok {
		r.fail("%s: NIMBUS_S3_KEY_FILE %s is on a mounted Secret", where, file)
		return
	}
	v := volumes[m.Name]
	if v == nil || v.Secret == nil {
		r.fail("%s: NIMBUS_S3_KEY_FILE %s is on a Secret volume", where, file)
		return
	}
	s, ok := objs.secrets[v.Secret.SecretName]
	if !ok {
		r.fail("%s: Secret %s of NIMBUS_S3_KEY_FILE exists", where, v.Secret.SecretName)
		return
	}
	key := path.Base(file)
	val, ok := s.Data[key]
	if !ok {
		if sv, sok := s.StringData[key]; sok {
			val, ok = []byte(sv), true
		}
	}
	r.check(ok && len(val) == 32, "%s: Secret %s key %s holds exactly 32 bytes (the S3 server key; got %d)", where, s.Name, key, len(val))
	r.check(m.ReadOnly, "%s: the S3 key's Secret is mounted read-only", where)
}

func checkService(r *report, objs *k8sObjects, svc *corev1.Service) {
	where := "Service/" + svc.Name
	var target *appsv1.Deployment
	for _, d := range objs.deployments {
		if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			target = d
		}
	}
	if target == nil {
		r.fail("%s: selects a Deployment's pods", where)
		return
	}
	r.ok("%s: selects Deployment/%s", where, target.Name)
	for _, p := range svc.Spec.Ports {
		found := false
		for _, c := range target.Spec.Template.Spec.Containers {
			for _, cp := range c.Ports {
				if (p.TargetPort.Type == intstr.String && cp.Name == p.TargetPort.StrVal) ||
					(p.TargetPort.Type == intstr.Int && cp.ContainerPort == p.TargetPort.IntVal) {
					found = true
				}
			}
		}
		r.check(found, "%s: port %s targets a container port (%s)", where, p.Name, p.TargetPort.String())
	}
}

func checkIngress(r *report, objs *k8sObjects, ing *networkingv1.Ingress) {
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			b := p.Backend.Service
			if b == nil {
				r.fail("Ingress/%s: path %s has a service backend", ing.Name, p.Path)
				continue
			}
			found := false
			for _, svc := range objs.services {
				if svc.Name != b.Name {
					continue
				}
				for _, sp := range svc.Spec.Ports {
					found = found || (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Number != 0 && sp.Port == b.Port.Number)
				}
			}
			port := b.Port.Name
			if port == "" {
				port = fmt.Sprint(b.Port.Number)
			}
			r.check(found, "Ingress/%s: backend %s port %s is a Service port", ing.Name, b.Name, port)
		}
	}
}
