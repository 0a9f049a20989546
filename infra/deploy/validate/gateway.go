package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// gateway holds what the artefacts must agree with, read from `nimbus-gateway describe --json`
// (the binary's own clap definitions, health routes and metric table).
type gateway struct {
	envVars   map[string]*describeArg // NIMBUS_* variables the gateway reads -> the flag (nil: not a flag)
	commands  map[string]*describeCommand
	livePath  string
	readyPath string
	metrics   map[string]describeMetric
}

// The parts of `describe --json` (gateway/src/describe.rs) used here.
type describeArg struct {
	ID             string   `json:"id"`
	Long           *string  `json:"long"`
	Short          *string  `json:"short"`
	Aliases        []string `json:"aliases"`
	Env            *string  `json:"env"`
	TakesValue     bool     `json:"takes_value"`
	Defaults       []string `json:"defaults"`
	PossibleValues []string `json:"possible_values"`
	Positional     bool     `json:"positional"`
}

type describeCommand struct {
	Name     string             `json:"name"`
	Args     []*describeArg     `json:"args"`
	Commands []*describeCommand `json:"commands"`
}

type describeMetric struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Labels []string `json:"labels"`
}

type description struct {
	Format int `json:"format"`
	describeCommand
	Env []struct {
		Name string `json:"name"`
	} `json:"env"`
	Health struct {
		Liveness  string `json:"liveness"`
		Readiness string `json:"readiness"`
	} `json:"health"`
	Metrics []describeMetric `json:"metrics"`
}

// describeFormat is the `format` of describe's output this validator understands.
const describeFormat = 1

var reNimbusEnvName = regexp.MustCompile(`^NIMBUS_[A-Z0-9_]+$`)

func loadGateway(file string) (*gateway, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var d description
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%s: not the output of `nimbus-gateway describe --json`: %v", file, err)
	}
	if d.Format != describeFormat {
		return nil, fmt.Errorf("%s: describe format %d, this validator reads %d", file, d.Format, describeFormat)
	}
	gw := &gateway{envVars: map[string]*describeArg{}, commands: map[string]*describeCommand{},
		livePath: d.Health.Liveness, readyPath: d.Health.Readiness, metrics: map[string]describeMetric{}}
	for _, c := range d.Commands {
		gw.commands[c.Name] = c
		for _, a := range c.Args {
			if a.Env != nil {
				gw.envVars[*a.Env] = a
			}
		}
	}
	for _, e := range d.Env {
		gw.envVars[e.Name] = nil
	}
	for _, m := range d.Metrics {
		gw.metrics[m.Name] = m
	}
	switch {
	case gw.commands["serve"] == nil:
		return nil, fmt.Errorf("%s: no `serve` command", file)
	case len(gw.envVars) < 10:
		return nil, fmt.Errorf("%s: only %d NIMBUS_* variables", file, len(gw.envVars))
	case gw.livePath == "" || gw.readyPath == "":
		return nil, fmt.Errorf("%s: no health routes", file)
	case len(gw.metrics) == 0:
		return nil, fmt.Errorf("%s: no metrics", file)
	}
	return gw, nil
}

// checkEnvName fails for a NIMBUS_* name the gateway does not read (a typo would be ignored
// silently at run time). Other names (AWS_*, POSTGRES_*) are not the gateway's to judge.
func (gw *gateway) checkEnvName(r *report, where, name string) {
	if !strings.HasPrefix(name, "NIMBUS_") {
		return
	}
	_, ok := gw.envVars[name]
	r.check(reNimbusEnvName.MatchString(name) && ok, "%s: %s is a variable the gateway reads", where, name)
}

// checkEnv checks a variable's name and, when its flag accepts a fixed set of values (or is a
// switch), its value: `NIMBUS_STORE=s4` would stop the gateway at start.
func (gw *gateway) checkEnv(r *report, where, name, value string) {
	gw.checkEnvName(r, where, name)
	a := gw.envVars[name]
	// Empty is unset to clap; ${...} is filled in later.
	if a == nil || value == "" || strings.Contains(value, "${") {
		return
	}
	allowed := a.PossibleValues
	if !a.TakesValue {
		allowed = []string{"true", "false"}
	}
	if len(allowed) > 0 {
		r.check(contains(allowed, value), "%s: %s=%q is one of %v", where, name, value, allowed)
	}
}

// checkArgv checks a command line given to the gateway (after the binary's name): a subcommand
// it has, and only flags that subcommand accepts, each given a value when it takes one.
func (gw *gateway) checkArgv(r *report, where string, argv []string) {
	if len(argv) == 0 {
		r.fail("%s: names a subcommand (the image's entrypoint is the gateway)", where)
		return
	}
	cmd := gw.commands[argv[0]]
	if cmd == nil || strings.HasPrefix(argv[0], "-") {
		r.fail("%s: %q is a nimbus-gateway subcommand", where, argv[0])
		return
	}
	r.ok("%s: %s is a nimbus-gateway subcommand", where, argv[0])
	for i := 1; i < len(argv); i++ {
		tok := argv[i]
		if !strings.HasPrefix(tok, "-") || tok == "-" {
			r.fail("%s: %s takes no positional argument %q", where, argv[0], tok)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(tok, "-"), "=")
		var arg *describeArg
		for _, a := range cmd.Args {
			if strings.HasPrefix(tok, "--") && (a.Long != nil && *a.Long == name || contains(a.Aliases, name)) ||
				!strings.HasPrefix(tok, "--") && a.Short != nil && *a.Short == name {
				arg = a
			}
		}
		if arg == nil {
			r.fail("%s: %s is a flag of nimbus-gateway %s", where, tok, argv[0])
			continue
		}
		if arg.TakesValue && !hasValue {
			if i+1 >= len(argv) {
				r.fail("%s: %s is given a value", where, tok)
				continue
			}
			i++
			value, hasValue = argv[i], true
		}
		switch {
		case !arg.TakesValue && hasValue:
			r.fail("%s: %s takes no value", where, tok)
		case len(arg.PossibleValues) > 0:
			r.check(contains(arg.PossibleValues, value), "%s: %s %q is one of %v", where, tok, value, arg.PossibleValues)
		default:
			r.ok("%s: %s is a flag of nimbus-gateway %s", where, tok, argv[0])
		}
	}
}

// parseSize mirrors nimbus_proto::size::parse_size (proto/src/size.rs): a number (decimals
// allowed) and a unit: none/B, K/KiB, M/MiB, G/GiB, T/TiB, P/PiB (1024-based), KB, MB, GB, TB,
// PB (1000-based), case-insensitive.
func parseSize(raw string) (uint64, error) {
	s := strings.TrimSpace(raw)
	split := strings.IndexFunc(s, func(c rune) bool { return !(c >= '0' && c <= '9' || c == '.') })
	if split < 0 {
		split = len(s)
	}
	num, unit := s[:split], strings.ToLower(strings.TrimSpace(s[split:]))
	mults := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
		"t": 1 << 40, "tib": 1 << 40, "p": 1 << 50, "pib": 1 << 50,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	}
	mult, ok := mults[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("%q is not a size the gateway accepts", raw)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size the gateway accepts", raw)
	}
	return uint64(math.Round(v * mult)), nil
}

const (
	mib = 1 << 20
	// The sizing rule of docs/OPERATIONS.md: --cache-mem + ~100 MiB baseline + 4 MiB per
	// concurrent transfer. A memory limit must at least allow this many transfers.
	baselineMem    = 100 * mib
	perTransferMem = 4 * mib
	minTransfers   = 16
)

func minMemory(cacheMem uint64) uint64 {
	return cacheMem + baselineMem + minTransfers*perTransferMem
}

// parseTrustedProxies mirrors the gateway's --trusted-proxies parser (gateway/src/auth/
// forwarded.rs): comma-separated CIDR networks or bare addresses; spaces and empty items are
// ignored.
func parseTrustedProxies(raw string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(raw, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(item); err == nil && a.Zone() == "" {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		return nil, fmt.Errorf("%q is not an address or a CIDR network", item)
	}
	return out, nil
}

// trustsAddr: one of the networks holds the address (IPv4-mapped IPv6 compared as IPv4, as the
// gateway does).
func trustsAddr(nets []netip.Prefix, a netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(a.Unmap()) || p.Contains(a) {
			return true
		}
	}
	return false
}

// checkTrustedProxies: a gateway behind a TLS-terminating proxy (plain HTTP) must name that
// proxy in NIMBUS_TRUSTED_PROXIES, or every client has the proxy's address and one password
// guesser locks everyone out of signing in. Returns the parsed networks.
func checkTrustedProxies(r *report, where string, env map[string]string) []netip.Prefix {
	if env["NIMBUS_PLAIN_HTTP"] != "true" {
		return nil
	}
	raw, set := env["NIMBUS_TRUSTED_PROXIES"]
	nets, err := parseTrustedProxies(raw)
	r.check(set && err == nil && len(nets) > 0,
		"%s: behind a proxy (NIMBUS_PLAIN_HTTP), NIMBUS_TRUSTED_PROXIES %q names it%s", where, raw, errSuffix(err))
	return nets
}
