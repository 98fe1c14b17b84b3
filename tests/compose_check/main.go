// Command compose_check checks a docker-compose file without a Docker engine, for what
// `docker compose up` would trip on. It loads the file with compose-go, the Compose
// specification's loader that Docker Compose itself uses, then checks that:
//
//   - the file parses and validates (schema, interpolation, compose-go's consistency checks);
//   - every service has an image or a build;
//   - every local build context is a directory and its Dockerfile exists;
//   - every depends_on names a service that exists;
//   - every bind-mounted host path (and config/secret file) exists;
//   - no host port is published twice (a wildcard address overlaps every address).
//
// Usage: go run . path/to/docker-compose.yml
//
// It prints one line per problem and exits 1, or a summary and exits 0 (2: wrong usage).
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: compose_check <docker-compose.yml>")
		os.Exit(2)
	}
	project, problems := check(os.Args[1])
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Println(summary(os.Args[1], project))
}

// load parses, interpolates and validates the file as `docker compose config` would. Variables
// come from a .env file beside it, as in Docker Compose, but not from the caller's environment,
// so the result does not depend on who runs the check. With consistency false, compose-go's
// cross-reference checks are skipped: they stop at the first problem, and check wants them all.
func load(path string, consistency bool) (*types.Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(abs)
	env := types.Mapping{}
	if dotEnv := filepath.Join(dir, ".env"); fileExists(dotEnv) {
		if env, err = dotenv.GetEnvFromFile(map[string]string{}, []string{dotEnv}); err != nil {
			return nil, err
		}
	}
	details := types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: env,
	}
	return loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		// The file's own `name:` wins over this default, as in Docker Compose.
		o.SetProjectName(loader.NormalizeProjectName(filepath.Base(dir)), false)
		o.SkipConsistencyCheck = !consistency
	})
}

// check returns the loaded project (nil when it does not load) and every problem found.
func check(path string) (*types.Project, []string) {
	project, err := load(path, false)
	if err != nil {
		return nil, []string{fmt.Sprintf("invalid compose file: %v", err)}
	}
	var problems []string
	for _, name := range sortedKeys(project.Services) {
		problems = append(problems, checkService(project, project.Services[name])...)
	}
	problems = append(problems, checkObjectFiles(project)...)
	problems = append(problems, portClashes(project)...)
	// compose-go's own consistency checks cover more (undefined networks, volumes, secrets, ...).
	// It reports only its first finding; skip it when it is one of the kinds named above already.
	if _, err := load(path, true); err != nil && !coveredAbove(err) {
		problems = append(problems, fmt.Sprintf("invalid compose file: %v", err))
	}
	return project, problems
}

func coveredAbove(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "has neither an image nor a build context") ||
		strings.Contains(msg, "depends on undefined service")
}

func checkService(project *types.Project, svc types.ServiceConfig) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("service %s: ", svc.Name)+fmt.Sprintf(format, args...))
	}
	// A provider service (compose-go's `provider:`) is run by a plugin and needs no image.
	if svc.Image == "" && svc.Build == nil && svc.Provider == nil {
		add("has neither image nor build")
	}
	if b := svc.Build; b != nil && !remoteContext(b.Context) {
		if info, err := os.Stat(b.Context); err != nil || !info.IsDir() {
			add("build context %s is not a directory", rel(project, b.Context))
		} else if b.DockerfileInline == "" {
			dockerfile := b.Dockerfile
			if !filepath.IsAbs(dockerfile) {
				dockerfile = filepath.Join(b.Context, dockerfile)
			}
			if !fileExists(dockerfile) {
				add("Dockerfile %s does not exist", rel(project, dockerfile))
			}
		}
	}
	for _, dep := range sortedKeys(svc.DependsOn) {
		if _, ok := project.Services[dep]; ok {
			continue
		}
		if _, off := project.DisabledServices[dep]; off {
			if svc.DependsOn[dep].Required {
				add("depends_on %s, which no active profile enables", dep)
			}
			continue
		}
		add("depends_on unknown service %s", dep)
	}
	for _, v := range svc.Volumes {
		if v.Type == types.VolumeTypeBind && !pathExists(v.Source) {
			add("bind mount source %s does not exist", rel(project, v.Source))
		}
	}
	return problems
}

// checkObjectFiles checks the files of configs and secrets, which Compose bind-mounts too.
func checkObjectFiles(project *types.Project) []string {
	var problems []string
	add := func(kind, name string, o types.FileObjectConfig) {
		if o.File != "" && !pathExists(o.File) {
			problems = append(problems, fmt.Sprintf("%s %s: file %s does not exist", kind, name, rel(project, o.File)))
		}
	}
	for _, name := range sortedKeys(project.Configs) {
		add("config", name, types.FileObjectConfig(project.Configs[name]))
	}
	for _, name := range sortedKeys(project.Secrets) {
		add("secret", name, types.FileObjectConfig(project.Secrets[name]))
	}
	return problems
}

// binding is one service's claim on a host port.
type binding struct {
	service string
	hostIP  string // "" for every address
}

func (b binding) String() string {
	if b.hostIP == "" {
		return b.service
	}
	return b.service + "@" + b.hostIP
}

// overlaps tells whether two bindings of one port and protocol would collide: the same address,
// or a wildcard one (no address, 0.0.0.0 for IPv4, :: for IPv6) and any address it covers.
func (b binding) overlaps(o binding) bool {
	if b.hostIP == "" || o.hostIP == "" {
		return true
	}
	x, y := net.ParseIP(b.hostIP), net.ParseIP(o.hostIP)
	if x == nil || y == nil {
		return b.hostIP == o.hostIP
	}
	sameFamily := (x.To4() != nil) == (y.To4() != nil)
	return x.Equal(y) || (sameFamily && (x.IsUnspecified() || y.IsUnspecified()))
}

type portKey struct {
	proto string
	port  int
}

// portClashes names every host port (or run of ports) that two bindings claim.
func portClashes(project *types.Project) []string {
	var problems []string
	claims := map[portKey][]binding{}
	for _, name := range sortedKeys(project.Services) {
		for _, p := range project.Services[name].Ports {
			if p.Published == "" {
				continue // the engine picks a free port
			}
			lo, hi, err := portRange(p.Published)
			if err != nil {
				problems = append(problems, fmt.Sprintf("service %s: published port %q: %v", name, p.Published, err))
				continue
			}
			proto := strings.ToLower(p.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			for port := lo; port <= hi; port++ {
				k := portKey{proto, port}
				claims[k] = append(claims[k], binding{name, p.HostIP})
			}
		}
	}
	keys := make([]portKey, 0, len(claims))
	for k := range claims {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].proto != keys[j].proto {
			return keys[i].proto < keys[j].proto
		}
		return keys[i].port < keys[j].port
	})
	// Runs of consecutive ports with the same claimants make one line, so a clashing range of
	// a thousand ports does not make a thousand.
	var start, prev portKey
	var who string
	flush := func() {
		if who == "" {
			return
		}
		if start.port == prev.port {
			problems = append(problems, fmt.Sprintf("host port %d/%s is published more than once: %s", start.port, start.proto, who))
		} else {
			problems = append(problems, fmt.Sprintf("host ports %d-%d/%s are published more than once: %s", start.port, prev.port, start.proto, who))
		}
		who = ""
	}
	for _, k := range keys {
		clash := clashing(claims[k])
		if clash == "" || clash != who || k.proto != prev.proto || k.port != prev.port+1 {
			flush()
			start, who = k, clash
		}
		prev = k
	}
	flush()
	return problems
}

// clashing lists the bindings that overlap another one, or returns "" when none do.
func clashing(bs []binding) string {
	var names []string
	for i, b := range bs {
		for j, o := range bs {
			if i != j && b.overlaps(o) {
				names = append(names, b.String())
				break
			}
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// portRange parses a published port: "8080" or "8000-8010".
func portRange(s string) (int, int, error) {
	loS, hiS, isRange := strings.Cut(s, "-")
	lo, err := strconv.Atoi(loS)
	if err != nil {
		return 0, 0, fmt.Errorf("not a port number")
	}
	hi := lo
	if isRange {
		if hi, err = strconv.Atoi(hiS); err != nil {
			return 0, 0, fmt.Errorf("not a port range")
		}
	}
	if lo < 1 || hi > 65535 || hi < lo {
		return 0, 0, fmt.Errorf("out of range")
	}
	return lo, hi, nil
}

// summary is the line printed when there is no problem.
func summary(path string, project *types.Project) string {
	var ports []string
	seen := map[string]bool{}
	for _, name := range sortedKeys(project.Services) {
		for _, p := range project.Services[name].Ports {
			if p.Published != "" && !seen[p.Published] {
				seen[p.Published] = true
				ports = append(ports, p.Published)
			}
		}
	}
	slices.SortFunc(ports, func(a, b string) int {
		x, _, _ := portRange(a)
		y, _, _ := portRange(b)
		return x - y
	})
	return fmt.Sprintf("%s: project %q, %d services (%s), host ports %s: no problems",
		path, project.Name, len(project.Services), strings.Join(sortedKeys(project.Services), ", "),
		strings.Join(ports, ", "))
}

// remoteContext tells whether a build context is not a local directory (a Git or HTTP URL,
// another service's image, a builder-specific scheme), as compose-go decides it.
func remoteContext(c string) bool {
	for _, prefix := range []string{"https://", "http://", "git://", "ssh://", "github.com/", "git@", types.ServicePrefix} {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return strings.Contains(c, "://")
}

// rel shows a path relative to the project directory when it lies inside it.
func rel(project *types.Project, p string) string {
	if r, err := filepath.Rel(project.WorkingDir, p); err == nil && !strings.HasPrefix(r, "..") {
		return "./" + filepath.ToSlash(r)
	}
	return p
}

func fileExists(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir()
}

func pathExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
