package main

import (
	"os"
	"regexp"
	"testing"
)

// TestDockerfile_BuildsWithGoModsGoVersion keeps the image's Go equal to
// the go directive, so that the container runs the Go the tests ran.
func TestDockerfile_BuildsWithGoModsGoVersion(t *testing.T) {
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
