package realnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/test/doccommands"
)

// TestInstallFromRelease installs troupe from what `make release` wrote and from nothing else,
// as a cluster admin without the repository does: the release directory is copied away from the
// checkout, its checksums are checked, its image archives (an index of the platforms the release
// was built for, TROUPE_RELEASE_PLATFORMS, each with a binary of that architecture) are imported
// into the real node's containerd, and the docs' commands install it (test/doccommands, run in the release's
// directory): from troupe.yaml, under which a job runs, inspected with the release's kubectl
// plugin, and which the docs' upgrade commands then apply again; from troupe-crds.yaml and
// troupe-namespaced.yaml; and from the chart with each of the docs' helm install commands, the
// first then upgraded with the docs' CRD apply and helm upgrade. Each ends with the docs'
// uninstall of its form, after which nothing of troupe may be left. The release is built at a version no other image of this machine carries
// (TROUPE_RELEASE_VERSION, from make test-realnode), so the operator's pods and the launcher's
// agent can only run from the release's archives.
func TestInstallFromRelease(t *testing.T) {
	src, version := os.Getenv("TROUPE_RELEASE_DIST"), os.Getenv("TROUPE_RELEASE_VERSION")
	if src == "" || version == "" {
		t.Fatal("TROUPE_RELEASE_DIST and TROUPE_RELEASE_VERSION are not set: run with make test-realnode")
	}
	stopOperator()
	realNodeOnly(t)
	dist := t.TempDir()
	if out, err := exec.Command("cp", "-r", src+"/.", dist).CombinedOutput(); err != nil {
		t.Fatalf("copy the release: %v\n%s", err, out)
	}
	files, _ := os.ReadDir(dist)
	var listing []string
	for _, f := range files {
		info, _ := f.Info()
		listing = append(listing, fmt.Sprintf("%10d  %s", info.Size(), f.Name()))
	}
	t.Logf("release %s:\n%s", version, strings.Join(listing, "\n"))

	check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum --check SHA256SUMS: %v\n%s", err, out)
	}

	var archives []string
	for _, image := range []string{"troupe-operator", "troupe-agent"} {
		archive := filepath.Join(dist, image+"-"+version+".oci.tar")
		checkImageArchive(t, archive, "ghcr.io/troupe-dev/"+image+":"+version, image)
		archives = append(archives, archive)
	}
	if out, err := exec.Command(filepath.Join(repoRoot, "hack", "controlplane", "realnode-import.sh"), archives...).CombinedOutput(); err != nil {
		t.Fatalf("import the release's images into the node: %v\n%s", err, out)
	}

	// The docs' commands, run in the release's directory; the images are under their names.
	v := doccommands.Values{Version: version, Registry: "ghcr.io/troupe-dev"}
	image := "ghcr.io/troupe-dev/troupe-operator:" + version
	t.Run("troupe.yaml", func(t *testing.T) { releaseInstallAndJob(t, dist, v) })
	t.Run("namespaced", func(t *testing.T) {
		t.Cleanup(func() { uninstallWithDocs(t, dist, doccommands.ReleaseNamespaced, v) })
		runDocs(t, dist, doccommands.ReleaseNamespaced, doccommands.PrepareNamespace, v)
		runDocs(t, dist, doccommands.ReleaseNamespaced, doccommands.Install, v)
		checkInstallOf(t, image)
		checkWatchesOnly(t, "troupe-jobs")
	})
	// The chart's two install commands (with and without the images' registry) are
	// alternatives: one install each; the first is then upgraded with the docs' commands, to
	// the same release (an upgrade across releases is TestUpgradeUnderRunningJobs's).
	for i, install := range docs(t, doccommands.ReleaseHelm, doccommands.Install, v) {
		t.Run(fmt.Sprintf("helm-%d", i), func(t *testing.T) {
			if i > 0 {
				testutil.LongOnly(t) // the first command's chart, with the images' registry set
			}
			t.Cleanup(func() { uninstallWithDocs(t, dist, doccommands.ReleaseHelm, v) })
			runDocs(t, dist, doccommands.ReleaseHelm, doccommands.PrepareNamespace, v)
			runDoc(t, dist, install)
			checkInstallOf(t, image)
			if i > 0 {
				return
			}
			runDocs(t, dist, doccommands.ReleaseHelm, doccommands.UpgradeCRDs, v)
			runDocs(t, dist, doccommands.ReleaseHelm, doccommands.Upgrade, v)
			checkInstallOf(t, image)
		})
	}
}

// releaseInstallAndJob installs the release in dist from troupe.yaml with the docs' commands
// (v names it), runs a job under it that the release's kubectl plugin inspects, upgrades it with
// the docs' commands to the same release, and uninstalls it with the docs' commands.
func releaseInstallAndJob(t *testing.T, dist string, v doccommands.Values) {
	version := v.Version
	runDocs(t, dist, doccommands.Release, doccommands.Install, v)
	t.Cleanup(func() { uninstallWithDocs(t, dist, doccommands.Release, v) })
	checkInstallOf(t, "ghcr.io/troupe-dev/troupe-operator:"+version)

	plugin := pluginFromRelease(t, dist, version)
	troupe := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(plugin, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl troupe %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if v := troupe("version"); !strings.HasPrefix(v, "kubectl-troupe "+version+" (revision ") {
		t.Errorf("kubectl troupe version = %q, want %s", v, version)
	}

	// An MPIJob (T9k's form, KubeExec) whose launcher waits for its workers with the release's
	// agent, then runs until the test ends it: the plugin is read while it runs.
	ns := namespace(t, "release-job")
	describeOnFailure(t, ns)
	mustKubectl(t, upgradeJobs()["mpijob/t9k"], "create", "-n", ns, "-f", "-")
	waitRunning(t, ns, "mpijob/t9k")
	agent := mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "troupe.dev/job-name=t9k,troupe.dev/role=master",
		"-o", "jsonpath={.items[0].spec.initContainers[0].image}")
	if want := "ghcr.io/troupe-dev/troupe-agent:" + version; agent != want {
		t.Errorf("the launcher's wait ran %q, want the release's agent %s", agent, want)
	}
	get := troupe("get", "-n", ns)
	if !regexp.MustCompile(`(?m)^MPIJob\s+t9k\s+Running\s+2/2\s`).MatchString(get) {
		t.Errorf("kubectl troupe get does not list the MPIJob Running with 2/2 workers:\n%s", get)
	}
	describe := troupe("describe", "-n", ns, "mpijob/t9k")
	for _, want := range []string{"MasterRunning", "AllWorkersReady", "t9k-worker-0", "t9k-worker-1"} {
		if !strings.Contains(describe, want) {
			t.Errorf("kubectl troupe describe lacks %q:\n%s", want, describe)
		}
	}
	hostfile := troupe("hostfile", "-n", ns, "t9k")
	if !strings.Contains(hostfile, "t9k-worker-0.t9k."+ns+".svc") || !strings.Contains(hostfile, "t9k-worker-1.t9k."+ns+".svc") {
		t.Errorf("kubectl troupe hostfile does not list both workers:\n%s", hostfile)
	}
	t.Logf("the release's kubectl troupe on a running MPIJob:\n$ kubectl troupe get -n %[1]s\n%[2]s\n$ kubectl troupe describe -n %[1]s mpijob/t9k\n%[3]s\n$ kubectl troupe hostfile -n %[1]s t9k\n%[4]s",
		ns, get, describe, hostfile)

	letFinish(t, ns)
	if _, err := waitCondition(t, ns, "mpijob.troupe.dev/t9k", "Succeeded", 4*time.Minute); err != nil {
		t.Fatalf("the job did not succeed: %v\n%s", err, troupe("describe", "-n", ns, "t9k"))
	}
	logs := troupe("logs", "-n", ns, "t9k")
	if !regexp.MustCompile(`(?m)^\[pod/t9k-launcher-[a-z0-9]+/launcher\] done$`).MatchString(logs) {
		t.Errorf("kubectl troupe logs lacks the launcher's prefixed last line:\n%s", logs)
	}
	t.Logf("the job Succeeded under the release's operator; kubectl troupe logs -n %s t9k:\n%s", ns, logs)

	// kubeflow's pi.yaml (only apiVersion changed, CPU limits halved for this node) over
	// kubeflow's SSH, its Secret kubernetes.io/ssh-auth, under the release's operator guard: no
	// request of the operator refused (a refused create would hold the job CreateRefused).
	needKubeflowImages(t)
	runKubeflowPi(t, namespace(t, "release-kubeflow-pi"), "pi.yaml", "Open MPI")
	checkNoRefusal(t)

	runDocs(t, dist, doccommands.Release, doccommands.UpgradeCRDs, v)
	runDocs(t, dist, doccommands.Release, doccommands.Upgrade, v)
	checkInstallOf(t, "ghcr.io/troupe-dev/troupe-operator:"+version)
}

// checkNoRefusal: no replica of the installed operator logged a request the API server refused
// it (403: RBAC, or a denial by troupe-operator-guard).
func checkNoRefusal(t *testing.T) {
	t.Helper()
	logs := mustKubectl(t, "", "logs", "-n", operatorNS, "-l", "app.kubernetes.io/name=troupe-operator", "--prefix", "--tail=-1")
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "is forbidden") || strings.Contains(l, "troupe-operator-guard") {
			t.Errorf("the operator was refused a request: %s", l)
		}
	}
}

// pluginFromRelease unpacks the release's kubectl plugin for this machine and returns its path.
func pluginFromRelease(t *testing.T, dist, version string) string {
	t.Helper()
	archive := filepath.Join(dist, fmt.Sprintf("kubectl-troupe-%s-%s-%s.tar.gz", version, runtime.GOOS, runtime.GOARCH))
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", archive, err, out)
	}
	for _, f := range []string{"kubectl-troupe", "LICENSE"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the plugin's archive lacks %s: %v", f, err)
		}
	}
	return filepath.Join(dir, "kubectl-troupe")
}

// ociDescriptor is the part of an OCI descriptor the check reads.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

// checkImageArchive: the OCI archive names ref, and holds an index of one image per platform of
// TROUPE_RELEASE_PLATFORMS (make test builds linux/amd64 alone, make test-long and make release
// linux/amd64 and linux/arm64) whose layer carries /binary built for that architecture.
func checkImageArchive(t *testing.T, path, ref, binary string) {
	t.Helper()
	blobs, err := readTar(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var layout struct{ Manifests []ociDescriptor }
	if err := json.Unmarshal(blobs["index.json"], &layout); err != nil || len(layout.Manifests) != 1 {
		t.Fatalf("%s: index.json %s: want one image: %v", path, blobs["index.json"], err)
	}
	if name := layout.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; name != ref {
		t.Errorf("%s names %q, want %s", path, name, ref)
	}
	blob := func(d string) []byte { return blobs["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] }
	var index struct{ Manifests []ociDescriptor }
	if err := json.Unmarshal(blob(layout.Manifests[0].Digest), &index); err != nil {
		t.Fatalf("%s: the image index: %v", path, err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var platforms []string
	for _, m := range index.Manifests {
		if m.Platform == nil {
			t.Fatalf("%s: a manifest without a platform in the index", path)
		}
		platform := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, platform)
		var manifest struct{ Layers []ociDescriptor }
		if err := json.Unmarshal(blob(m.Digest), &manifest); err != nil {
			t.Fatalf("%s %s: manifest: %v", path, platform, err)
		}
		machine, err := binaryMachine(manifest.Layers, blob, binary)
		if err != nil {
			t.Errorf("%s %s: %v", path, platform, err)
		} else if machine != machines[m.Platform.Architecture] {
			t.Errorf("%s %s: /%s is built for %v", path, platform, binary, machine)
		}
	}
	slices.Sort(platforms)
	want := strings.Fields(os.Getenv("TROUPE_RELEASE_PLATFORMS"))
	slices.Sort(want)
	if len(want) == 0 {
		t.Fatal("TROUPE_RELEASE_PLATFORMS is not set: run with make test-realnode")
	}
	if !slices.Equal(platforms, want) {
		t.Errorf("%s holds platforms %v, want %v", path, platforms, want)
	}
}

// binaryMachine finds name in the (gzip or plain) tar layers and returns its ELF machine.
func binaryMachine(layers []ociDescriptor, blob func(string) []byte, name string) (elf.Machine, error) {
	for _, l := range layers {
		var r io.Reader = bytes.NewReader(blob(l.Digest))
		if strings.HasSuffix(l.MediaType, "gzip") {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return 0, err
			}
			r = zr
		}
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return 0, err
			}
			if strings.TrimPrefix(h.Name, "./") != name {
				continue
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return 0, err
			}
			f, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				return 0, fmt.Errorf("/%s: %w", name, err)
			}
			return f.Machine, nil
		}
	}
	return 0, fmt.Errorf("no layer holds /%s", name)
}

// readTar reads every regular file of a tar archive into memory, by name.
func readTar(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if files[strings.TrimPrefix(h.Name, "./")], err = io.ReadAll(tr); err != nil {
			return nil, err
		}
	}
}
