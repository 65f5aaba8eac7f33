package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// kubeflowManifest reads one of kubeflow's published MPIJobs (test/manifests/kubeflow:
// mpi-operator's kubeflow.org/v2beta1, training-operator's kubeflow.org/v1) with only
// its apiVersion changed, as a user moving to troupe would, into namespace ns.
func kubeflowManifest(t *testing.T, file, ns string) *troupev1.MPIJob {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	published := ""
	for _, v := range []string{"apiVersion: kubeflow.org/v2beta1", "apiVersion: kubeflow.org/v1\n"} {
		if strings.Contains(string(data), v) {
			published = v
		}
	}
	if published == "" {
		t.Fatalf("%s is not kubeflow's v2beta1 or v1 MPIJob", file)
	}
	data = []byte(strings.Replace(string(data), strings.TrimSpace(published), "apiVersion: "+troupev1.GroupVersion.String(), 1))
	job := &troupev1.MPIJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	job.Namespace = ns
	return job
}

// Every MPIJob kubeflow publishes, with only apiVersion changed, runs to Succeeded on the
// simulated cluster, and its pods get kubeflow's runtime contract: the workers' own command
// (sshd -De when they name none), the job's key pair at sshAuthMountPath as id_rsa, id_rsa.pub
// and authorized_keys, the hostfile at /etc/mpi/hostfile in the implementation's format with
// slotsPerWorker, the implementation's host file variables and K_MPI_JOB_ROLE, kubeflow's
// labels, and the launcher's restartPolicy OnFailure.
func TestKubeflowExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "manifests", "kubeflow", "*.yaml"))
	if err != nil || len(files) < 7 {
		t.Fatalf("found %d of kubeflow's manifests (%v), want the 7 published", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(t)
			job := kubeflowManifest(t, f, ns)
			published := job.DeepCopy()
			if err := k8s.Create(ctx, job); err != nil {
				t.Fatalf("create: %v", err)
			}
			name := job.Name
			waitForMPIJob(t, ns, name, "Running", func(j *troupev1.MPIJob) bool {
				return j.Status.Phase == troupev1.JobRunning || j.Status.Phase == troupev1.JobSucceeded
			})
			checkKubeflowContract(t, ns, published)
			// The clean-pod policy is the manifest's (kubeflow.org/v1 may write it at
			// spec.cleanPodPolicy), else kubeflow's None.
			clean := troupev1.CleanPodPolicyNone
			if p := published.Spec.CleanPodPolicy; p != nil {
				clean = *p
			}
			if p := published.Spec.RunPolicy.CleanPodPolicy; p != nil {
				clean = *p
			}
			waitForMPIJob(t, ns, name, "Succeeded with runPolicy.cleanPodPolicy "+string(clean), func(j *troupev1.MPIJob) bool {
				return j.Status.Phase == troupev1.JobSucceeded && ptr.Deref(j.Spec.RunPolicy.CleanPodPolicy, "") == clean
			})
			if clean == troupev1.CleanPodPolicyNone || published.Spec.KubeflowWorkers() == 0 {
				return
			}
			eventually(t, "the worker pods of "+name+" deleted (cleanPodPolicy "+string(clean)+")", func(ctx context.Context) (bool, error) {
				pods, err := podsOf(ctx, ns, troupev1.RoleWorker)
				return err == nil && len(pods) == 0, err
			})
		})
	}
}

// checkKubeflowContract checks the children of a running job in kubeflow's form against what
// its manifest (as published) asks.
func checkKubeflowContract(t *testing.T, ns string, published *troupev1.MPIJob) {
	t.Helper()
	ctx := context.Background()
	name := published.Name
	specs := published.Spec.MPIReplicaSpecs
	mount := published.Spec.SSHAuthMountPath
	if mount == "" {
		mount = troupev1.DefaultSSHAuthMountPath
	}
	slots := ptr.Deref(published.Spec.SlotsPerWorker, 1)
	impl := published.Spec.MPIImplementation

	var secret corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-ssh"}, &secret); err != nil {
		t.Fatal(err)
	}
	if secret.Type != corev1.SecretTypeSSHAuth || len(secret.Data[corev1.SSHAuthPrivateKey]) == 0 || len(secret.Data[mpi.KubeflowSSHPublicKey]) == 0 {
		t.Errorf("Secret %s: type %s, keys %v; want kubernetes.io/ssh-auth with ssh-privatekey and ssh-publickey", secret.Name, secret.Type, keysOf(secret.Data))
	}

	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-mpi"}, &cm); err != nil {
		t.Fatal(err)
	}
	workers := ptr.Deref(specs.Worker.Replicas, 0)
	for i := range workers {
		host := name + "-worker-" + itoa(i) + "." + name + "." + ns + ".svc"
		line := host + " slots=" + itoa(slots)
		if impl == troupev1.MPIImplementationMPICH || impl == troupev1.MPIImplementationIntel {
			line = host + ":" + itoa(slots)
		}
		if !slices.Contains(strings.Split(cm.Data[mpi.HostfileKey], "\n"), line) {
			t.Errorf("hostfile lacks %q:\n%s", line, cm.Data[mpi.HostfileKey])
		}
	}
	if _, ok := cm.Data[mpi.DiscoverHostsKey]; !ok {
		t.Errorf("ConfigMap %s has no %s", cm.Name, mpi.DiscoverHostsKey)
	}

	var launcher batchv1.Job
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-launcher"}, &launcher); err != nil {
		t.Fatal(err)
	}
	lt := &launcher.Spec.Template
	if lt.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("launcher restartPolicy %s, want kubeflow's default OnFailure", lt.Spec.RestartPolicy)
	}
	lc := lt.Spec.Containers[0]
	writtenLauncher := specs.Launcher.Template.Spec.Containers[0]
	if lc.Name != writtenLauncher.Name || !slices.Equal(lc.Command, writtenLauncher.Command) || !slices.Equal(lc.Args, writtenLauncher.Args) {
		t.Errorf("launcher container %s runs %v %v, want the manifest's %s %v %v", lc.Name, lc.Command, lc.Args,
			writtenLauncher.Name, writtenLauncher.Command, writtenLauncher.Args)
	}
	hostfileVar := map[troupev1.MPIImplementation]string{
		"": "OMPI_MCA_orte_default_hostfile", troupev1.MPIImplementationOpenMPI: "OMPI_MCA_orte_default_hostfile",
		troupev1.MPIImplementationMPICH: "HYDRA_HOST_FILE", troupev1.MPIImplementationIntel: "I_MPI_HYDRA_HOST_FILE",
	}[impl]
	if !hasEnv(lc.Env, hostfileVar, mpi.KubeflowHostfilePath) || !hasEnv(lc.Env, mpi.EnvKubeflowRole, "launcher") {
		t.Errorf("launcher lacks %s=%s or %s=launcher: %+v", hostfileVar, mpi.KubeflowHostfilePath, mpi.EnvKubeflowRole, lc.Env)
	}
	checkKeyPairMount(t, "launcher", lt, &lc, mount, name+"-ssh")
	checkMounted(t, "launcher", &lc, mpi.KubeflowConfigMountPath)
	if lt.Labels[mpi.KubeflowJobNameLabel] != name || lt.Labels[mpi.KubeflowJobRoleLabel] != "launcher" {
		t.Errorf("launcher labels %v lack kubeflow's job-name and job-role", lt.Labels)
	}

	if workers == 0 {
		return
	}
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-worker"}, &sts); err != nil {
		t.Fatal(err)
	}
	wt := &sts.Spec.Template
	wc := wt.Spec.Containers[0]
	written := specs.Worker.Template.Spec.Containers[0]
	wantCommand, wantArgs := written.Command, written.Args
	if len(wantCommand) == 0 && len(wantArgs) == 0 {
		wantCommand = []string{"/usr/sbin/sshd", "-De"}
	}
	if wc.Name != written.Name || !slices.Equal(wc.Command, wantCommand) || !slices.Equal(wc.Args, wantArgs) {
		t.Errorf("worker container %s runs %v %v, want %s %v %v", wc.Name, wc.Command, wc.Args, written.Name, wantCommand, wantArgs)
	}
	if !hasEnv(wc.Env, mpi.EnvKubeflowRole, "worker") {
		t.Errorf("worker lacks %s=worker: %+v", mpi.EnvKubeflowRole, wc.Env)
	}
	checkKeyPairMount(t, "worker", wt, &wc, mount, name+"-ssh")
	if wt.Labels[mpi.KubeflowJobNameLabel] != name || wt.Labels[mpi.KubeflowJobRoleLabel] != "worker" {
		t.Errorf("worker labels %v lack kubeflow's job-name and job-role", wt.Labels)
	}
}

// checkKeyPairMount checks that container c of tmpl mounts the job's key pair at path, as
// kubeflow's images read it.
func checkKeyPairMount(t *testing.T, role string, tmpl *corev1.PodTemplateSpec, c *corev1.Container, path, secret string) {
	t.Helper()
	var volume string
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			volume = m.Name
		}
	}
	for _, v := range tmpl.Spec.Volumes {
		if v.Name != volume || v.Secret == nil {
			continue
		}
		var files []string
		for _, it := range v.Secret.Items {
			files = append(files, it.Path)
		}
		slices.Sort(files)
		if v.Secret.SecretName != secret || !slices.Equal(files, []string{"authorized_keys", "id_rsa", "id_rsa.pub"}) {
			t.Errorf("%s: the volume at %s is Secret %s with %v, want %s with authorized_keys, id_rsa, id_rsa.pub", role, path, v.Secret.SecretName, files, secret)
		}
		return
	}
	t.Errorf("%s: container %s mounts no Secret at %s: %+v", role, c.Name, path, c.VolumeMounts)
}

func checkMounted(t *testing.T, role string, c *corev1.Container, path string) {
	t.Helper()
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path }) {
		t.Errorf("%s: container %s mounts nothing at %s", role, c.Name, path)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func keysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// kubeflowJob is a small job in kubeflow's form: a launcher and n workers (none: no Worker).
func kubeflowJob(ns, name string, workers int32) *troupev1.MPIJob {
	pod := func(container string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: container, Image: "registry.example/mpi-pi:1", Command: []string{"mpirun", "-n", "2", "/pi"},
		}}}}
	}
	job := &troupev1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: troupev1.MPIJobSpec{MPIReplicaSpecs: &troupev1.MPIReplicaSpecs{
			Launcher: &troupev1.ReplicaSpec{Template: pod("mpi-launcher")},
		}},
	}
	if workers > 0 {
		w := pod("mpi-worker")
		w.Spec.Containers[0].Command = nil
		job.Spec.MPIReplicaSpecs.Worker = &troupev1.ReplicaSpec{Replicas: ptr.To(workers), Template: w}
	}
	return job
}

// A job in kubeflow's form without workers runs its launcher alone: no StatefulSet, an empty
// hostfile, Succeeded.
func TestKubeflowLauncherAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	job := kubeflowJob(ns, "alone", 0)
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatalf("create: %v", err)
	}
	waitForMPIJob(t, ns, "alone", "Succeeded", func(j *troupev1.MPIJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alone-worker"}, &sts); !apierrors.IsNotFound(err) {
		t.Errorf("a launcher-only job has a worker StatefulSet (%v)", err)
	}
}

// runLauncherAsWorker puts the launcher first in the hostfile (and in discover_hosts.sh) with
// the workers' slots; launcherCreationPolicy WaitForWorkersReady creates no launcher while a
// worker is not Ready.
func TestKubeflowLauncherAsWorkerAndCreationPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	job := kubeflowJob(ns, "rank0", 2)
	job.Spec.RunLauncherAsWorker = ptr.To(true)
	job.Spec.SlotsPerWorker = ptr.To[int32](2)
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatalf("create: %v", err)
	}
	eventually(t, "the launcher first in the hostfile", func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rank0-mpi"}, &cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		lines := strings.Split(strings.TrimSpace(cm.Data[mpi.HostfileKey]), "\n")
		return len(lines) == 3 && lines[0] == "rank0-launcher.rank0."+ns+".svc slots=2" &&
			strings.Contains(cm.Data[mpi.DiscoverHostsKey], "rank0-launcher.rank0."+ns+".svc:2"), nil
	})
	waitForMPIJob(t, ns, "rank0", "Succeeded", func(j *troupev1.MPIJob) bool { return j.Status.Phase == troupev1.JobSucceeded })

	// Workers that cannot be scheduled are never Ready: no launcher is created meanwhile.
	held := kubeflowJob(ns, "held", 2)
	held.Spec.LauncherCreationPolicy = troupev1.LauncherWaitForWorkersReady
	held.Spec.MPIReplicaSpecs.Worker.Template.Spec.NodeSelector = map[string]string{"troupe.dev/no-such-node": "true"}
	if err := k8s.Create(ctx, held); err != nil {
		t.Fatalf("create: %v", err)
	}
	waitForMPIJob(t, ns, "held", "saying its workers are Unschedulable", func(j *troupev1.MPIJob) bool {
		return j.Status.Reason == "Unschedulable"
	})
	var launcher batchv1.Job
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "held-launcher"}, &launcher); !apierrors.IsNotFound(err) {
		t.Errorf("the launcher of a job whose workers are not Ready exists (%v); launcherCreationPolicy is WaitForWorkersReady", err)
	}
}
