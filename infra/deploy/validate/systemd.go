package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	reEnvLine       = regexp.MustCompile(`^#?\s*([A-Z][A-Z0-9_]*)=(.*)$`)
	reUnitEnv       = regexp.MustCompile(`^Environment=(.*)$`)
	reExecStart     = regexp.MustCompile(`^ExecStart=[-@:+!]*(\S+)\s*(.*)$`)
	reDockerEnvName = regexp.MustCompile(`\b(NIMBUS_[A-Z0-9_]+)=(\S*)`)
	reDockerCmd     = regexp.MustCompile(`(?m)^CMD\s+(\[.*\])\s*$`)
)

// checkSystemd checks the variable names of the env example (also the commented-out ones: an
// operator uncomments them) and of the units' Environment= lines. `systemd-analyze verify`
// (infra/validate-deploy.sh) checks the units themselves.
func checkSystemd(r *report, gw *gateway, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	seen, execs := 0, 0
	for _, f := range files {
		base := filepath.Base(f)
		isEnv := strings.HasSuffix(base, ".env.example")
		isUnit := strings.HasSuffix(base, ".service")
		if !isEnv && !isUnit {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			r.fail("%s: %v", base, err)
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if isEnv {
				if m := reEnvLine.FindStringSubmatch(line); m != nil {
					gw.checkEnv(r, base, m[1], strings.Trim(strings.TrimSpace(m[2]), `"`))
					seen++
				}
				if v, ok := strings.CutPrefix(line, "NIMBUS_TRUSTED_PROXIES="); ok {
					_, err := parseTrustedProxies(v)
					r.check(err == nil, "%s: NIMBUS_TRUSTED_PROXIES %q parses%s", base, v, errSuffix(err))
				}
			} else if m := reUnitEnv.FindStringSubmatch(line); m != nil {
				if k, v, ok := strings.Cut(strings.Trim(m[1], `"`), "="); ok {
					gw.checkEnv(r, base, k, v)
					seen++
				}
			} else if m := reExecStart.FindStringSubmatch(line); m != nil && filepath.Base(m[1]) == "nimbus-gateway" {
				gw.checkArgv(r, base+" ExecStart", strings.Fields(m[2]))
				execs++
			}
		}
		fh.Close()
	}
	r.check(seen > 0, "%s: found variables to check", dir)
	r.check(execs > 0, "%s: found ExecStart lines of nimbus-gateway to check", dir)
}

func checkDockerfile(r *report, gw *gateway, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		r.fail("%s: %v", file, err)
		return
	}
	n := 0
	for _, m := range reDockerEnvName.FindAllStringSubmatch(string(b), -1) {
		gw.checkEnv(r, filepath.Base(file), m[1], strings.Trim(m[2], `"\`))
		n++
	}
	r.check(n > 0, "%s: found variables to check", file)
	s := string(b)
	if m := reDockerCmd.FindStringSubmatch(s); m == nil {
		r.fail("%s: has a CMD in exec (JSON) form", file)
	} else {
		var argv []string
		err := json.Unmarshal([]byte(m[1]), &argv)
		r.check(err == nil, "%s: CMD is a JSON array%s", file, errSuffix(err))
		gw.checkArgv(r, filepath.Base(file)+" CMD", argv)
	}
	r.check(strings.Contains(s, "FROM debian:12-slim"), "%s: runtime stage is debian:12-slim", file)
	r.check(regexp.MustCompile(`(?m)^USER\s+[1-9]`).MatchString(s), "%s: runs as a non-root USER", file)
	r.check(strings.Contains(s, gw.readyPath), "%s: HEALTHCHECK asks %s", file, gw.readyPath)
}
