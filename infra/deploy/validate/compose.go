package main

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

const gatewayImage = "nimbus/gateway:"

var (
	reUpstream       = regexp.MustCompile(`(?s)upstream\s+(\S+)\s*\{(.*?)\}`)
	reUpstreamServer = regexp.MustCompile(`(?m)^\s*server\s+([A-Za-z0-9_.-]+):(\d+)`)
)

func checkCompose(r *report, gw *gateway, file, envFile string) {
	abs, _ := filepath.Abs(file)
	opts := []cli.ProjectOptionsFn{cli.WithWorkingDirectory(filepath.Dir(abs)), cli.WithName("nimbus")}
	if envFile != "" {
		opts = append(opts, cli.WithEnvFiles(envFile), cli.WithDotEnv)
	}
	po, err := cli.NewProjectOptions([]string{abs}, opts...)
	if err != nil {
		r.fail("%s: compose options: %v", file, err)
		return
	}
	// Loading interpolates ${VARS} (only from envFile: the caller's environment is not used),
	// validates against the compose JSON schema and normalizes.
	project, err := po.LoadProject(context.Background())
	if err != nil {
		r.fail("%s: compose-go load (schema, interpolation): %v", file, err)
		return
	}
	r.ok("%s: compose-go load (schema, interpolation)", file)

	names := make([]string, 0, len(project.Services))
	for n := range project.Services {
		names = append(names, n)
	}
	sort.Strings(names)

	var gateways []types.ServiceConfig
	for _, n := range names {
		s := project.Services[n]
		where := "service " + n
		hasHC := s.HealthCheck != nil && !s.HealthCheck.Disable && len(s.HealthCheck.Test) > 0
		waits := false
		for dep, d := range s.DependsOn {
			if d.Condition == types.ServiceConditionHealthy || d.Condition == types.ServiceConditionCompletedSuccessfully {
				waits = true
			}
			target, ok := project.Services[dep]
			r.check(ok, "%s: depends_on %s is a service", where, dep)
			if ok && d.Condition == types.ServiceConditionHealthy {
				r.check(target.HealthCheck != nil && !target.HealthCheck.Disable && len(target.HealthCheck.Test) > 0,
					"%s: depends_on %s service_healthy, and %s has a healthcheck", where, dep, dep)
			}
		}
		r.check(hasHC || waits, "%s: has a healthcheck or depends_on with a condition", where)
		if strings.HasPrefix(s.Image, gatewayImage) {
			gateways = append(gateways, s)
		}
	}

	r.check(len(gateways) >= 2, "at least 2 gateway services (image %s*)", gatewayImage)
	cacheSources := map[string]string{}
	shared := map[string]string{}
	trusted := map[string][]netip.Prefix{}
	for _, s := range gateways {
		where := "gateway " + s.Name
		env := map[string]string{}
		for k, v := range s.Environment {
			if v != nil {
				env[k] = *v
				gw.checkEnv(r, where, k, *v)
			} else {
				gw.checkEnvName(r, where, k)
			}
		}
		if len(s.Entrypoint) > 0 {
			r.check(filepath.Base(s.Entrypoint[0]) == "nimbus-gateway", "%s: entrypoint runs nimbus-gateway", where)
			gw.checkArgv(r, where+" entrypoint", append(append([]string{}, s.Entrypoint[1:]...), s.Command...))
		} else if len(s.Command) > 0 {
			gw.checkArgv(r, where+" command", s.Command)
		}
		r.check(hasHCOn(s, gw.readyPath), "%s: healthcheck asks %s", where, gw.readyPath)
		r.check(s.ReadOnly, "%s: read_only root file system", where)
		r.check(contains(s.CapDrop, "ALL"), "%s: cap_drop ALL", where)
		r.check(s.User != "" && !strings.HasPrefix(s.User, "0") && !strings.HasPrefix(s.User, "root"), "%s: runs as a non-root user (%q)", where, s.User)
		r.check(contains(s.SecurityOpt, "no-new-privileges:true") || contains(s.SecurityOpt, "no-new-privileges"), "%s: security_opt no-new-privileges", where)
		r.check(s.StopGracePeriod != nil && time.Duration(*s.StopGracePeriod) >= 30*time.Second,
			"%s: stop_grace_period >= 30s (the gateway drains for up to 20 s)", where)
		if cm, ok := env["NIMBUS_CACHE_MEM"]; ok {
			n, err := parseSize(cm)
			r.check(err == nil && s.MemLimit > 0 && uint64(s.MemLimit) >= minMemory(n),
				"%s: mem_limit %d MiB >= NIMBUS_CACHE_MEM %s + 100 MiB + %d transfers x 4 MiB", where, int64(s.MemLimit)/mib, cm, minTransfers)
		} else {
			r.fail("%s: NIMBUS_CACHE_MEM is set", where)
		}
		for _, k := range []string{"NIMBUS_CACHE_SIZE"} {
			if v, ok := env[k]; ok {
				_, err := parseSize(v)
				r.check(err == nil, "%s: %s %q parses%s", where, k, v, errSuffix(err))
			}
		}
		// Its own cache volume.
		cacheDir := env["NIMBUS_CACHE_DIR"]
		var cacheVol *types.ServiceVolumeConfig
		for i := range s.Volumes {
			if filepath.Clean(s.Volumes[i].Target) == filepath.Clean(cacheDir) {
				cacheVol = &s.Volumes[i]
			}
		}
		if cacheDir == "" || cacheVol == nil {
			r.fail("%s: NIMBUS_CACHE_DIR %q is a volume", where, cacheDir)
		} else {
			other, dup := cacheSources[cacheVol.Source]
			if dup {
				r.fail("%s: cache volume %q is its own, but %s mounts it too (two gateways never share a cache)", where, cacheVol.Source, other)
			} else {
				r.check(cacheVol.Type == types.VolumeTypeVolume, "%s: cache volume %q is a named volume of its own", where, cacheVol.Source)
			}
			cacheSources[cacheVol.Source] = s.Name
		}
		// The S3 key file is a secret every gateway shares.
		if kf := env["NIMBUS_S3_KEY_FILE"]; kf != "" {
			found := false
			for _, sec := range s.Secrets {
				target := sec.Target
				if target == "" {
					target = sec.Source
				}
				if !strings.HasPrefix(target, "/") {
					target = "/run/secrets/" + target
				}
				if target == kf {
					_, defined := project.Secrets[sec.Source]
					found = defined
				}
			}
			r.check(found, "%s: NIMBUS_S3_KEY_FILE %s is a defined secret", where, kf)
		}
		// Shared truth: one database, one store, one S3 key for all of them.
		for _, k := range []string{"NIMBUS_DATABASE_URL", "NIMBUS_STORE", "NIMBUS_S3_ENDPOINT", "NIMBUS_S3_BUCKET", "NIMBUS_S3_PREFIX", "NIMBUS_S3_KEY_FILE"} {
			if prev, seen := shared[k]; seen {
				r.check(prev == env[k], "%s: %s is the same on every gateway", where, k)
			} else {
				shared[k] = env[k]
			}
		}
		trusted[s.Name] = checkTrustedProxies(r, where, env)
		r.check(strings.HasPrefix(env["NIMBUS_DATABASE_URL"], "postgres://"), "%s: several gateways use PostgreSQL (NIMBUS_DATABASE_URL)", where)
		r.check(env["NIMBUS_STORE"] == "s3", "%s: several gateways use an S3 store (NIMBUS_STORE=s3)", where)
	}

	checkNginxUpstreams(r, project, gateways, trusted)
}

func hasHCOn(s types.ServiceConfig, path string) bool {
	if s.HealthCheck == nil || s.HealthCheck.Disable {
		return false
	}
	return strings.Contains(strings.Join(s.HealthCheck.Test, " "), path)
}

func contains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// checkNginxUpstreams reads the nginx.conf a service bind-mounts and checks that its upstream
// servers are compose services exposing those ports, that every gateway is in them, and that
// the gateways trust nginx's (fixed) address and nginx tells them the client's.
func checkNginxUpstreams(r *report, project *types.Project, gateways []types.ServiceConfig, trusted map[string][]netip.Prefix) {
	var confPath string
	var nginx types.ServiceConfig
	for _, s := range project.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && strings.HasSuffix(v.Source, "nginx.conf") {
				confPath = v.Source
				nginx = s
			}
		}
	}
	if confPath == "" {
		r.fail("a service bind-mounts an nginx.conf (the load balancer)")
		return
	}
	b, err := os.ReadFile(confPath)
	if err != nil {
		r.fail("nginx.conf: %v", err)
		return
	}
	inUpstream := map[string]bool{}
	for _, up := range reUpstream.FindAllStringSubmatch(string(b), -1) {
		for _, m := range reUpstreamServer.FindAllStringSubmatch(up[2], -1) {
			host, port := m[1], m[2]
			svc, ok := project.Services[host]
			exposed := false
			if ok {
				for _, e := range svc.Expose {
					exposed = exposed || e == port
				}
			}
			r.check(ok && exposed, "nginx upstream %s: server %s:%s is a compose service exposing that port", up[1], host, port)
			inUpstream[host] = true
		}
	}
	for _, g := range gateways {
		r.check(inUpstream[g.Name], "nginx: gateway %s is in an upstream", g.Name)
	}

	// The client's address reaches the gateways only through X-Forwarded-For from an address
	// they trust: nginx needs a fixed one (ipv4_address), inside every gateway's list.
	r.check(strings.Contains(string(b), "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for") ||
		strings.Contains(string(b), "proxy_set_header X-Forwarded-For $remote_addr"),
		"nginx.conf: sets X-Forwarded-For to the client's address")
	var addrs []netip.Addr
	for name, n := range nginx.Networks {
		if n == nil || n.Ipv4Address == "" {
			r.fail("service %s: a fixed ipv4_address on network %s (the gateways trust that address)", nginx.Name, name)
			continue
		}
		a, err := netip.ParseAddr(n.Ipv4Address)
		r.check(err == nil, "service %s: ipv4_address %q parses%s", nginx.Name, n.Ipv4Address, errSuffix(err))
		if err == nil {
			addrs = append(addrs, a)
		}
	}
	r.check(len(addrs) > 0, "service %s: has a fixed address the gateways can trust (networks.*.ipv4_address)", nginx.Name)
	for _, g := range gateways {
		for _, a := range addrs {
			r.check(trustsAddr(trusted[g.Name], a), "gateway %s: NIMBUS_TRUSTED_PROXIES holds nginx's address %s", g.Name, a)
		}
	}
}
