package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile_BuildsWithGoModsGoVersion keeps the image's Go equal to
// the go directive, so that the container runs the Go the tests ran.
func TestDockerfile_BuildsWithGoModsGoVersion(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	image := regexp.MustCompile(`(?m)^FROM golang:(\S+) AS build$`).FindSubmatch(docker)
	if goVersion == nil || image == nil {
		t.Fatalf("go directive %q, build image %q: want both", goVersion, image)
	}
	if string(image[1]) != string(goVersion[1]) {
		t.Errorf("the Dockerfile builds with golang:%s, go.mod says go %s: pin the image to it", image[1], goVersion[1])
	}
}

// TestDockerignore_KeepsEveryLocalOutputOutOfTheImage: what git ignores as
// local state (data dirs, binaries, the scale program's kept data dirs) and
// the backups the docs make (usersync-backup.db) never go into the build
// context.
func TestDockerignore_KeepsEveryLocalOutputOutOfTheImage(t *testing.T) {
	t.Parallel()
	read := func(name string) map[string]bool {
		t.Helper()
		b, err := os.ReadFile("../../" + name)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				out[strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/")] = true
			}
		}
		return out
	}
	git, docker := read(".gitignore"), read(".dockerignore")
	git["usersync-backup.db"] = true // docs/operations.md's backup
	for p := range git {
		if !docker[p] {
			t.Errorf(".dockerignore lacks %q, which .gitignore (or the docs' backup) has", p)
		}
	}
}
