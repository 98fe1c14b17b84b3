package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// problemsOf writes compose.yml (and any other files, by relative path) into a fresh directory
// with a Dockerfile, and checks it.
func problemsOf(t *testing.T, compose string, files ...string) []string {
	t.Helper()
	dir := t.TempDir()
	files = append(files, "Dockerfile", "FROM scratch\n", "compose.yml", compose)
	for i := 0; i < len(files); i += 2 {
		path := filepath.Join(dir, files[i])
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(files[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, problems := check(filepath.Join(dir, "compose.yml"))
	return problems
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n  got  %q\n  want %q", got, want)
	}
}

func TestValidFileHasNoProblems(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    image: busybox
    ports: ["8080:80", "127.0.0.1:9000:9000", "5353:53/udp"]
    volumes: ["./conf/a.yml:/etc/a.yml:ro", "data:/data"]
  b:
    build: .
    depends_on:
      a:
        condition: service_healthy
    ports: ["8081:80", "127.0.0.2:9000:9000", "5353:53/tcp", "9001"]
volumes:
  data:
`, "conf/a.yml", "x: 1\n")
	expect(t, got)
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
	expect(t, got, "host port 9092/tcp is published more than once: a, b")
}

func TestWildcardAddressClashesWithASpecificOne(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    image: busybox
    ports: ["127.0.0.1:8080:80", "0.0.0.0:8443:443"]
  b:
    image: busybox
    ports: ["8080:80", "[::1]:8443:443"]
`)
	// 0.0.0.0 covers IPv4 addresses only, so [::1]:8443 is free.
	expect(t, got, "host port 8080/tcp is published more than once: a@127.0.0.1, b")
}

func TestOverlappingRangesMakeOneLine(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    image: busybox
    ports: ["8000-8005:8000-8005"]
  b:
    image: busybox
    ports:
      - target: 80
        published: "8004-8010"
`)
	expect(t, got, "host ports 8004-8005/tcp are published more than once: a, b")
}

func TestServiceWithoutImageOrBuild(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    command: ["true"]
  b:
    image: busybox
    depends_on: [ghost]
`)
	// compose-go's loader would stop at the first of these; both are named, once each.
	expect(t, got, "service a: has neither image nor build", "service b: depends_on unknown service ghost")
}

func TestMissingFilesAreNamed(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    build: ./nowhere
  b:
    build:
      context: .
      dockerfile: other.Dockerfile
  c:
    image: busybox
    volumes: ["./missing.yml:/etc/x.yml:ro"]
    configs: [settings]
configs:
  settings:
    file: ./settings.json
`)
	expect(t, got,
		"service a: build context ./nowhere is not a directory",
		"service b: Dockerfile ./other.Dockerfile does not exist",
		"service c: bind mount source ./missing.yml does not exist",
		"config settings: file ./settings.json does not exist")
}

func TestDotEnvFeedsInterpolation(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    image: busybox
    ports: ["${A_PORT:-7000}:80"]
  b:
    image: busybox
    ports: ["7001:80"]
`, ".env", "A_PORT=7001\n")
	expect(t, got, "host port 7001/tcp is published more than once: a, b")
}

func TestComposeGoConsistencyErrorsAreReported(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    image: busybox
    networks: [backend]
`)
	if len(got) != 1 || !strings.HasPrefix(got[0], "invalid compose file: ") || !strings.Contains(got[0], "undefined network backend") {
		t.Fatalf("want compose-go's undefined-network error, got %q", got)
	}
}

func TestUnparsableFileIsAProblem(t *testing.T) {
	got := problemsOf(t, "services: [this is not a mapping\n")
	if len(got) != 1 || !strings.HasPrefix(got[0], "invalid compose file: ") {
		t.Fatalf("want one parse error, got %q", got)
	}
}

func TestSchemaViolationIsAProblem(t *testing.T) {
	got := problemsOf(t, `
services:
  a:
    image: busybox
    restart_policy: always
`)
	if len(got) != 1 || !strings.Contains(got[0], "restart_policy") {
		t.Fatalf("want the unknown attribute named, got %q", got)
	}
}
