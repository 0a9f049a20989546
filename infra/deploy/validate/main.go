// Command validate checks Nimbus's deployment artefacts (infra/deploy/) without running them:
// no container engine or cluster is needed.
//
//   - Kubernetes manifests: strictly decoded into the real k8s.io/api types (unknown or
//     misspelled fields and wrong types fail), then checked against the gateway: probes on its
//     real health routes, resources limits, non-root and locked-down security contexts,
//     sizing against NIMBUS_CACHE_MEM / NIMBUS_CACHE_SIZE, references between objects.
//   - The compose file: loaded with compose-go (the loader of `docker compose`, which validates
//     against the compose JSON schema), then every service must have a healthcheck or wait on
//     one, and the gateways must be locked down and consistent with each other and nginx.
//   - Prometheus alert rules: parsed with Prometheus's own rule-file parser (strict YAML and
//     PromQL), and every nimbus_* metric must be one the gateway exports.
//   - NIMBUS_* variable names in every artefact must be ones the gateway reads, with a value
//     its flag accepts when that is a fixed set; command lines given to the gateway (container
//     args, compose command, ExecStart, CMD) name its subcommands and their flags.
//
// Facts about the gateway (flags, variables, health routes, metrics) come from the output of
// `nimbus-gateway describe --json` (-gateway-describe), generated from its own definitions, so
// renaming one there makes this fail until the artefacts follow.
//
// Exit status 0 when every check passed, 1 when any failed, 2 on usage errors.
package main

import (
	"flag"
	"fmt"
	"os"
)

type report struct {
	checks   int
	problems int
}

func (r *report) ok(format string, a ...any) {
	r.checks++
	if *verbose {
		fmt.Printf("ok    "+format+"\n", a...)
	}
}

func (r *report) fail(format string, a ...any) {
	r.checks++
	r.problems++
	fmt.Printf("FAIL  "+format+"\n", a...)
}

// check records one check: ok when cond holds, otherwise a failure with the message.
func (r *report) check(cond bool, format string, a ...any) {
	if cond {
		r.ok(format, a...)
	} else {
		r.fail(format, a...)
	}
}

func (r *report) section(format string, a ...any) {
	fmt.Printf("== "+format+"\n", a...)
}

var verbose = flag.Bool("v", false, "print every passed check too")

func main() {
	gwDescribe := flag.String("gateway-describe", "", "the output of `nimbus-gateway describe --json`: flags, variables, health routes, metrics")
	k8sDir := flag.String("k8s", "", "directory of Kubernetes manifests with a kustomization.yaml")
	composeFile := flag.String("compose", "", "compose file")
	composeEnv := flag.String("compose-env", "", "env file to interpolate the compose file with (e.g. its .env.example)")
	alerts := flag.String("alerts", "", "Prometheus rule file")
	systemdDir := flag.String("systemd", "", "directory of systemd units and the gateway env example")
	dockerfile := flag.String("dockerfile", "", "the gateway image's Dockerfile")
	flag.Parse()
	if *gwDescribe == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: validate -gateway-describe FILE [-k8s DIR] [-compose FILE [-compose-env FILE]] [-alerts FILE] [-systemd DIR] [-dockerfile FILE] [-v]")
		os.Exit(2)
	}
	gw, err := loadGateway(*gwDescribe)
	if err != nil {
		fmt.Fprintf(os.Stderr, "validate: %v\n", err)
		os.Exit(2)
	}
	fmt.Printf("gateway: %d commands, %d NIMBUS_* variables, liveness %s, readiness %s, %d metrics (from %s)\n",
		len(gw.commands), len(gw.envVars), gw.livePath, gw.readyPath, len(gw.metrics), *gwDescribe)

	r := &report{}
	if *k8sDir != "" {
		r.section("kubernetes: %s", *k8sDir)
		checkK8s(r, gw, *k8sDir)
	}
	if *composeFile != "" {
		r.section("compose: %s", *composeFile)
		checkCompose(r, gw, *composeFile, *composeEnv)
	}
	if *alerts != "" {
		r.section("prometheus rules: %s", *alerts)
		checkAlerts(r, gw, *alerts)
	}
	if *systemdDir != "" {
		r.section("systemd: %s", *systemdDir)
		checkSystemd(r, gw, *systemdDir)
	}
	if *dockerfile != "" {
		r.section("dockerfile: %s", *dockerfile)
		checkDockerfile(r, gw, *dockerfile)
	}
	fmt.Printf("validate: %d checks, %d failed\n", r.checks, r.problems)
	if r.problems > 0 {
		os.Exit(1)
	}
}
