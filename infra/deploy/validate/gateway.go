package main

import (
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// gateway holds what the artefacts must agree with, read from the gateway's source.
type gateway struct {
	envVars   map[string]bool   // NIMBUS_* variables the gateway reads
	livePath  string            // route of health::healthz
	readyPath string            // route of health::readyz
	metrics   map[string]string // nimbus_* metric name -> counter | gauge | histogram
}

var (
	reEnvAttr       = regexp.MustCompile(`env\s*=\s*"(NIMBUS_[A-Z0-9_]+)"`)
	reEnvVar        = regexp.MustCompile(`env::var(?:_os)?\(\s*"(NIMBUS_[A-Z0-9_]+)"`)
	reRoute         = regexp.MustCompile(`\.route\(\s*"([^"]+)"\s*,\s*get\(\s*health::(healthz|readyz)\s*\)\s*\)`)
	reMetric        = regexp.MustCompile(`\b(counter|gauge|histogram)!\(\s*"(nimbus_[a-z0-9_]+)"`)
	reNimbusEnvName = regexp.MustCompile(`^NIMBUS_[A-Z0-9_]+$`)
)

func loadGateway(src string) (*gateway, error) {
	gw := &gateway{envVars: map[string]bool{}, metrics: map[string]string{}}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rs") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(b)
		for _, m := range reEnvAttr.FindAllStringSubmatch(s, -1) {
			gw.envVars[m[1]] = true
		}
		for _, m := range reEnvVar.FindAllStringSubmatch(s, -1) {
			gw.envVars[m[1]] = true
		}
		for _, m := range reMetric.FindAllStringSubmatch(s, -1) {
			gw.metrics[m[2]] = m[1]
		}
		for _, m := range reRoute.FindAllStringSubmatch(s, -1) {
			if m[2] == "healthz" {
				gw.livePath = m[1]
			} else {
				gw.readyPath = m[1]
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case len(gw.envVars) < 10:
		return nil, fmt.Errorf("found only %d NIMBUS_* variables under %s: is it the gateway's source?", len(gw.envVars), src)
	case gw.livePath == "" || gw.readyPath == "":
		return nil, fmt.Errorf("no route to health::healthz / health::readyz under %s", src)
	case len(gw.metrics) == 0:
		return nil, fmt.Errorf("no nimbus_* metrics under %s", src)
	}
	return gw, nil
}

// checkEnvName fails for a NIMBUS_* name the gateway does not read (a typo would be ignored
// silently at run time). Other names (AWS_*, POSTGRES_*) are not the gateway's to judge.
func (gw *gateway) checkEnvName(r *report, where, name string) {
	if !strings.HasPrefix(name, "NIMBUS_") {
		return
	}
	r.check(reNimbusEnvName.MatchString(name) && gw.envVars[name], "%s: %s is a variable the gateway reads", where, name)
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
