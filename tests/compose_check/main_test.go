package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write puts a compose file (and a Dockerfile for builds) in a fresh directory.
func write(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "compose.yml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func problemsOf(t *testing.T, yaml string) []string {
	t.Helper()
	_, problems := check(write(t, yaml))
	return problems
}

func TestValidFileHasNoProblems(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    image: busybox
    ports: ["8080:80"]
  b:
    build: .
    depends_on: [a]
    ports: ["8081:80"]
`)
	if len(got) != 0 {
		t.Fatalf("unexpected problems: %v", got)
	}
}

func TestHostPortClashIsNamed(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    image: busybox
    ports: ["9092:9092"]
  b:
    image: busybox
    ports: ["9092:19092"]
`)
	if len(got) != 1 || !strings.Contains(got[0], "host port :9092/tcp published by [a b]") {
		t.Fatalf("want one clash on 9092, got %v", got)
	}
}

func TestServiceWithoutImageOrBuild(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    command: ["true"]
`)
	found := false
	for _, p := range got {
		// compose-go's own validation refuses it first; check() names it too if it ever stops.
		found = found || (strings.Contains(p, "neither") && (strings.Contains(p, `"a"`) || strings.Contains(p, "service a:")))
	}
	if !found {
		t.Fatalf("want the missing image named, got %v", got)
	}
}

func TestMissingBuildContextAndBindSource(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    build: ./nowhere
  b:
    image: busybox
    volumes: ["./missing.yml:/etc/x.yml:ro"]
`)
	joined := strings.Join(got, "\n")
	if !strings.Contains(joined, "service a: build context") || !strings.Contains(joined, "service b: bind mount source") {
		t.Fatalf("want both named, got %v", got)
	}
}

func TestUnparsableFileIsAProblem(t *testing.T) {
	got := problemsOf(t, "services: [this is not a mapping\n")
	if len(got) != 1 || !strings.HasPrefix(got[0], "invalid compose file") {
		t.Fatalf("want a parse error, got %v", got)
	}
}
