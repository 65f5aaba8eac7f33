package main

import (
	"os"
	"regexp"
	"testing"
)

// TestDefaultImagesAreBuilt: the images the operator and its install use by default are the
// ones `make images` builds and names (IMAGE_REGISTRY and IMAGE_TAG of hack/versions.mk), so a
// cluster that imported them runs without a registry.
func TestDefaultImagesAreBuilt(t *testing.T) {
	mk, err := os.ReadFile("../../hack/versions.mk")
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `\s*\?=\s*(\S+)\s*$`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("hack/versions.mk sets no %s", name)
		}
		return string(m[1])
	}
	registry, tag := value("IMAGE_REGISTRY"), value("IMAGE_TAG")
	if tag == "$(VERSION)" { // the release's images are tagged with its version
		tag = value("VERSION")
	}
	if want := registry + "/troupe-agent:" + tag; defaultAgentImage != want {
		t.Errorf("--agent-image defaults to %s; make images builds %s", defaultAgentImage, want)
	}
	deployment, err := os.ReadFile("../../config/install/operator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := registry + "/troupe-operator:" + tag
	images := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)\s*$`).FindAllSubmatch(deployment, -1)
	if len(images) != 1 || string(images[0][1]) != want {
		t.Errorf("config/install/operator.yaml runs images %q; make images builds %s", images, want)
	}
}
