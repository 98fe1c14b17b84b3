// Command compose_check loads a docker-compose file with the Compose specification's own Go
// loader (compose-go, which Docker Compose itself uses) and checks what a `docker compose up`
// would trip on, without a Docker engine: the file parses and validates, every service has an
// image or a build whose context and Dockerfile exist, depends_on names services that exist,
// bind-mounted host paths exist, and no two services publish the same host port.
//
// Usage: go run . path/to/docker-compose.yml   (exit 0: no problem; 1: problems, one per line)
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

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
	fmt.Printf("%s: project %q, %d services, no problems\n", os.Args[1], project.Name, len(project.Services))
}

// load parses and validates the file as `docker compose config` would, with an empty
// environment (defaults in ${VAR:-default} apply).
func load(path string) (*types.Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	content, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs, Content: content}},
		Environment: types.Mapping{},
	}
	return loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		if _, named := o.GetProjectName(); !named {
			o.SetProjectName(loader.NormalizeProjectName(filepath.Base(filepath.Dir(abs))), false)
		}
	})
}

// check returns the project and every problem found in it.
func check(path string) (*types.Project, []string) {
	project, err := load(path)
	if err != nil {
		return nil, []string{fmt.Sprintf("invalid compose file: %v", err)}
	}
	var problems []string
	publishers := map[string][]string{}
	names := make([]string, 0, len(project.Services))
	for name := range project.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		svc := project.Services[name]
		if svc.Image == "" && svc.Build == nil {
			problems = append(problems, fmt.Sprintf("service %s: neither image nor build", name))
		}
		if svc.Build != nil {
			problems = append(problems, checkBuild(name, svc.Build)...)
		}
		for dep := range svc.DependsOn {
			if _, ok := project.Services[dep]; !ok {
				problems = append(problems, fmt.Sprintf("service %s: depends_on unknown service %s", name, dep))
			}
		}
		for _, v := range svc.Volumes {
			if v.Type == types.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					problems = append(problems, fmt.Sprintf("service %s: bind mount source %s does not exist", name, v.Source))
				}
			}
		}
		for _, p := range svc.Ports {
			if p.Published == "" {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = "tcp"
			}
			key := fmt.Sprintf("%s:%s/%s", p.HostIP, p.Published, proto)
			publishers[key] = append(publishers[key], name)
		}
	}
	keys := make([]string, 0, len(publishers))
	for k := range publishers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(publishers[k]) > 1 {
			problems = append(problems, fmt.Sprintf("host port %s published by %v", k, publishers[k]))
		}
	}
	return project, problems
}

// checkBuild checks that a build's context directory and Dockerfile exist.
func checkBuild(name string, b *types.BuildConfig) []string {
	info, err := os.Stat(b.Context)
	if err != nil || !info.IsDir() {
		return []string{fmt.Sprintf("service %s: build context %s is not a directory", name, b.Context)}
	}
	dockerfile := b.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	if !filepath.IsAbs(dockerfile) {
		dockerfile = filepath.Join(b.Context, dockerfile)
	}
	if _, err := os.Stat(dockerfile); err != nil {
		return []string{fmt.Sprintf("service %s: Dockerfile %s does not exist", name, dockerfile)}
	}
	return nil
}
