package engine

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// buildNetworkPolicy returns the NetworkPolicy named like the job that lets only the job's own
// pods connect to its pods, or nil when the job asks for none. Every port is closed to other
// pods, not only sshd's: MPI's and NCCL's data ports are chosen at run time. The policy selects
// pods by the job's UID, so a job of another kind with the same name is another job. Egress is
// left alone, and NetworkPolicies add up: a policy of the user's may open a port (a metrics
// endpoint) to more pods.
func buildNetworkPolicy(s *Spec) *networkingv1.NetworkPolicy {
	if !s.NetworkPolicyEnabled() {
		return nil
	}
	ownPods := metav1.LabelSelector{MatchLabels: map[string]string{troupev1.LabelJobUID: string(s.Owner.UID)}}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: s.childMeta(s.Name, s.JobLabels()),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: ownPods,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: ownPods.DeepCopy()}},
			}},
		},
	}
	return withSpecHash(np)
}

// buildPodDisruptionBudget returns the PodDisruptionBudget named like the job over its worker
// pods, or nil when the job asks for none. It allows no voluntary disruption of a worker while
// the workers are meant to run (one lost rank ends an MPI run): minAvailable is the job's
// worker count, 0 once the workers are released or the job has ended (workers kept by
// cleanPodPolicy None, or after a failure with cleanPodPolicyOn Succeeded, are there to be
// inspected, not to be protected), so a drain is never blocked by a job that runs nothing.
func buildPodDisruptionBudget(s *Spec, workersReleased bool) *policyv1.PodDisruptionBudget {
	if !s.DisruptionBudgetEnabled() {
		return nil
	}
	var minAvailable int32
	if !workersReleased && !s.Plan.Ended() {
		minAvailable = s.TotalWorkers()
	}
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: s.childMeta(s.Name, s.JobLabels()),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(minAvailable)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				troupev1.LabelJobUID: string(s.Owner.UID),
				troupev1.LabelRole:   troupev1.RoleWorker,
			}},
		},
	}
	return withSpecHash(pdb)
}

// Every function in this file is pure: the desired children are a function of the Spec (and,
// for the worker sets, of whether the workers are released) alone.

// MasterLabels are the labels of the master Job and its pods.
func (s *Spec) MasterLabels() map[string]string {
	l := s.JobLabels()
	l[troupev1.LabelRole] = troupev1.RoleMaster
	return l
}

// WorkerLabels are the labels of one worker set's StatefulSet and pods.
func (s *Spec) WorkerLabels(ws *WorkerSet) map[string]string {
	l := s.JobLabels()
	l[troupev1.LabelRole] = troupev1.RoleWorker
	l[troupev1.LabelWorkerSet] = ws.Name
	return l
}

// WorkerSelector is the selector of one worker set's StatefulSet: its labels but the common
// job-name label, which came in a later release than the StatefulSets of running jobs, whose
// selectors cannot change. It includes the job UID, so it never selects another job's pods.
func (s *Spec) WorkerSelector(ws *WorkerSet) map[string]string {
	l := s.WorkerLabels(ws)
	delete(l, troupev1.LabelJobName)
	return l
}

// BuildService returns the headless Service that gives every pod of the job a stable DNS
// name <pod hostname>.<job>.<namespace>.svc. Not-ready addresses are published so that names
// resolve while pods are still starting; MPI launchers look hosts up before they are ready.
func BuildService(s *Spec) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: s.childMeta(s.ServiceName(), s.JobLabels()),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{troupev1.LabelJobUID: string(s.Owner.UID)},
			PublishNotReadyAddresses: true,
		},
	}
	if p, ok := s.Backend.(ServicePorter); ok {
		svc.Spec.Ports = p.ServicePorts(s)
	}
	return withSpecHash(svc)
}

// BuildMasterJob returns the batch Job that runs the master pod to completion. The Job is
// suspended while the troupe job is, so its pod is removed and recreated on resume. A failed
// master pod is replaced only once it has fully terminated (podReplacementPolicy Failed), so
// two launchers never run at once.
func BuildMasterJob(s *Spec) *batchv1.Job {
	tmpl := s.podTemplate(s.Master.Template, s.MasterLabels(), nil)
	tmpl.Spec.Hostname = s.MasterHostname()
	tmpl.Spec.Subdomain = s.ServiceName()
	if tmpl.Spec.RestartPolicy == "" {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	failurePolicy := s.Master.PodFailurePolicy.DeepCopy()
	if rules := s.masterExitCodeRules(); len(rules) > 0 {
		// A pod failure policy needs a pod that is not restarted in place: a master of
		// restartPolicy OnFailure (kubeflow's default for a launcher) is run with Never, each
		// retry a new pod, so that a rule on its exit code acts on the first exit
		// (masterRestartOverridden; the Warning event RestartPolicyOverridden says so). Where
		// the cluster has container restart rules, its containers still restart in place for
		// the exit codes no rule names (restartInPlace).
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		if s.masterRestartsInPlace() {
			restartInPlace(&tmpl.Spec, rules)
		}
		if failurePolicy == nil {
			failurePolicy = &batchv1.PodFailurePolicy{}
		}
		failurePolicy.Rules = append(failurePolicy.Rules, rules...)
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: s.childMeta(s.Master.JobName, s.MasterLabels()),
		Spec: batchv1.JobSpec{
			Parallelism:           ptr.To[int32](1),
			Completions:           ptr.To[int32](1),
			BackoffLimit:          ptr.To(s.Master.BackoffLimit),
			ActiveDeadlineSeconds: s.Master.ActiveDeadlineSeconds,
			Suspend:               ptr.To(s.Suspended()),
			PodFailurePolicy:      failurePolicy,
			PodReplacementPolicy:  ptr.To(batchv1.Failed),
			Template:              tmpl,
		},
	}
	return withSpecHash(job)
}

// BuildWorkerStatefulSet returns the StatefulSet of one worker set. Released workers (the job
// ended or is suspended) are scaled to zero, so no pod keeps holding CPUs or GPUs. Pods start
// in parallel: MPI workers have no start order, and ordered start would bring them up one at
// a time. The update strategy is OnDelete and the template's own hash is recorded: the engine
// decides when a new template may reach pods (holdTemplate).
func BuildWorkerStatefulSet(s *Spec, ws *WorkerSet, released bool) *appsv1.StatefulSet {
	labels := s.WorkerLabels(ws)
	replicas := ws.Replicas
	if released {
		replicas = 0
	}
	tmpl := s.podTemplate(ws.Template, labels, ws)
	if tmpl.Spec.RestartPolicy == "" {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: s.childMeta(ws.ChildName, labels),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         s.ServiceName(),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Selector:            &metav1.LabelSelector{MatchLabels: s.WorkerSelector(ws)},
			Template:            tmpl,
		},
	}
	s.withStatefulSetClaims(sts, ws)
	setTemplateHash(sts, &sts.Spec.Template)
	return withSpecHash(sts)
}

// BuildWorkerJobs returns the batch Jobs of a worker set whose pods run to completion
// (WorkerSet.RunsToCompletion): one Job of one pod per index, named <ChildName>-<index> like its
// pod's hostname under the job's headless Service, as a StatefulSet's pod would be named. One
// Job per pod, not one Indexed Job, because pods of a set differ by index (a torch worker's rank
// is its index plus one, which no field of an Indexed Job's one template can say; the backend
// writes it: IndexedDecorator). Released workers (the job ended or is suspended, paused or
// restarting) are suspended: the Job controller deletes a running pod and runs it again on
// resume unless it had succeeded. A failed pod is replaced only once it has fully terminated, so
// two pods never share a hostname. A Job's template cannot change, so a new one replaces the
// Job (holdChild).
func BuildWorkerJobs(s *Spec, ws *WorkerSet, released bool) []*batchv1.Job {
	return buildWorkerJobs(s, ws, released, wholeJobs)
}

// buildWorkerJobs builds the Jobs of ws, those named by whole with their whole pod template and
// the others as their outline: what the pass reads of a Job that exists (its labels, hashes,
// suspension and scheduling directives). A set of 4,095 workers with a template of 100 KiB
// would otherwise copy and hash 400 MiB on every pass of its job.
//
// Each Job records what its template is made of: the set's template (AnnotationSetTemplateHash,
// hashed once per set) and what its index adds to it (AnnotationIndexedTemplateHash: the set's
// hash with the index's additions made to the outline, see IndexedDecorator), so a Job is
// compared with what the job wants without its template being built. The spec hash is the
// outline's too, alike for both forms. A whole Job also carries its template's own hash
// (AnnotationTemplateHash), the one a Job made by v0.1.0 (which records no indexed hash) is
// compared by.
func buildWorkerJobs(s *Spec, ws *WorkerSet, released bool, whole func(name string) bool) []*batchv1.Job {
	labels := s.WorkerLabels(ws)
	base := s.podTemplate(ws.Template, labels, ws)
	base.Spec.Subdomain = s.ServiceName()
	if base.Spec.RestartPolicy == "" {
		base.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	setHash := templateHash(&base)
	outline := templateOutline(&base)
	jobs := make([]*batchv1.Job, 0, ws.Replicas)
	for i := range ws.Replicas {
		name := podOrdinalName(ws.ChildName, i)
		indexed := *outline.DeepCopy()
		s.addIndex(ws, i, name, &indexed)
		job := &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: s.childMeta(name, labels),
			Spec: batchv1.JobSpec{
				Parallelism:           ptr.To[int32](1),
				Completions:           ptr.To[int32](1),
				BackoffLimit:          ptr.To(ws.BackoffLimit),
				ActiveDeadlineSeconds: ws.ActiveDeadlineSeconds,
				Suspend:               ptr.To(released),
				PodFailurePolicy:      ws.PodFailurePolicy.DeepCopy(),
				PodReplacementPolicy:  ptr.To(batchv1.Failed),
				Template:              indexed,
			},
		}
		job.Annotations = map[string]string{
			troupev1.AnnotationSetTemplateHash:     setHash,
			troupev1.AnnotationIndexedTemplateHash: hashOf(setHash, &indexed),
		}
		withSpecHash(job)
		if whole(name) {
			job.Spec.Template = *base.DeepCopy()
			s.addIndex(ws, i, name, &job.Spec.Template)
			setTemplateHash(job, &job.Spec.Template)
		}
		jobs = append(jobs, job)
	}
	return jobs
}

// addIndex makes a worker set's pod template the template of the pod of index i and hostname
// name: its hostname, its own claims, and what the backend gives each index.
func (s *Spec) addIndex(ws *WorkerSet, i int32, name string, tmpl *corev1.PodTemplateSpec) {
	tmpl.Spec.Hostname = name
	for _, t := range s.claimTemplatesOf(ws) {
		withClaimVolume(tmpl, t.Name, workerClaimName(t.Name, name))
	}
	if d, ok := s.Backend.(IndexedDecorator); ok {
		d.DecorateIndexedPod(s, ws, i, tmpl)
	}
}

// wholeJobs builds every worker Job whole.
func wholeJobs(string) bool { return true }

func buildWorkerSet(s *Spec, ws *WorkerSet, released bool, whole func(name string) bool) []client.Object {
	if !ws.RunsToCompletion {
		return []client.Object{BuildWorkerStatefulSet(s, ws, released)}
	}
	var out []client.Object
	for _, j := range buildWorkerJobs(s, ws, released, whole) {
		out = append(out, j)
	}
	return out
}

// buildBackendObjects returns the backend's children with the job's labels and owner.
func buildBackendObjects(s *Spec) []client.Object {
	if s.Backend == nil {
		return nil
	}
	return s.ownedObjects(s.Backend.Objects(s))
}

// BuildGangObjects returns the gang provider's PodGroup, labelled and owned like every child.
func BuildGangObjects(s *Spec) []client.Object {
	if s.Gang == nil {
		return nil
	}
	return s.ownedObjects(s.Gang.Objects(s))
}

// ownedObjects gives objects of a backend or gang provider the job's namespace, labels and
// owner reference, and their spec hash.
func (s *Spec) ownedObjects(objs []client.Object) []client.Object {
	for _, o := range objs {
		meta := s.childMeta(o.GetName(), s.JobLabels())
		maps.Copy(meta.Labels, o.GetLabels())
		o.SetNamespace(meta.Namespace)
		o.SetLabels(meta.Labels)
		o.SetOwnerReferences(meta.OwnerReferences)
		withSpecHash(o)
	}
	return objs
}

// Children returns every desired child of the job, in creation order: objects without pods
// first (Service, backend objects), then the worker sets, then the master, so that the master
// never starts before its hosts can be named.
func Children(s *Spec, workersReleased bool) []client.Object {
	return children(s, workersReleased, wholeJobs)
}

// children are the Children, the worker Jobs not named by whole as their outline
// (buildWorkerJobs).
func children(s *Spec, workersReleased bool, whole func(name string) bool) []client.Object {
	objs := []client.Object{BuildService(s)}
	objs = append(objs, buildBackendObjects(s)...)
	// The PodGroup exists before any of its pods, so the scheduler never sees a pod of an
	// unknown gang.
	objs = append(objs, BuildGangObjects(s)...)
	if pdb := buildPodDisruptionBudget(s, workersReleased); pdb != nil {
		objs = append(objs, pdb)
	}
	if np := buildNetworkPolicy(s); np != nil {
		objs = append(objs, np)
	}
	for i := range s.WorkerSets {
		objs = append(objs, buildWorkerSet(s, &s.WorkerSets[i], workersReleased, whole)...)
	}
	if s.masterWanted() { // not while paused, or waiting for the previous master's pods to go
		objs = append(objs, BuildMasterJob(s))
	}
	for _, o := range objs {
		markManaged(o)
		s.Progress.mark(o)
	}
	return objs
}

// podTemplate copies a user's pod template and adds the job's labels, the scheduling policy's
// priority class and the backend's wiring. The user's own labels are kept; ours win a clash.
func (s *Spec) podTemplate(user corev1.PodTemplateSpec, labels map[string]string, ws *WorkerSet) corev1.PodTemplateSpec {
	tmpl := *user.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	maps.Copy(tmpl.Labels, labels)
	if tmpl.Spec.PriorityClassName == "" {
		tmpl.Spec.PriorityClassName = s.SchedulingPolicy.PriorityClassName
	}
	if s.Backend != nil {
		s.Backend.DecoratePod(s, ws, &tmpl)
	}
	if s.Gang != nil {
		s.Gang.DecoratePod(s, &tmpl)
	}
	s.CodeSync.decoratePod(s, &tmpl)
	s.Progress.decoratePod(&tmpl)
	s.withSharedClaims(&tmpl)
	s.applyRunMode(&tmpl, ws)
	s.labelRestartAttempt(&tmpl)
	endWithLogTail(&tmpl)
	return tmpl
}

// endWithLogTail makes each container whose template leaves the termination message policy
// unset end with its log's last lines as its termination message (FallbackToLogsOnError: only
// when it fails and wrote no message of its own). Programs (mpirun, a training script that
// raises) write why they failed to their output, not to /dev/termination-log; this way it
// reaches the pod's status, and from there the job's conditions (causes.go, launcherSaid).
func endWithLogTail(tmpl *corev1.PodTemplateSpec) {
	for _, cs := range [][]corev1.Container{tmpl.Spec.InitContainers, tmpl.Spec.Containers} {
		for i := range cs {
			if cs[i].TerminationMessagePolicy == "" {
				cs[i].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
			}
		}
	}
}

// withSpecHash records a hash of the object as built, so the engine can tell a change of what
// it wants from a child that merely was defaulted by the API server.
func withSpecHash[T client.Object](obj T) T {
	ann := obj.GetAnnotations()
	delete(ann, troupev1.AnnotationSpecHash)
	obj.SetAnnotations(ann)
	data, err := json.Marshal(obj)
	if err != nil {
		// The object was built from typed API structs, which always marshal.
		panic(fmt.Sprintf("marshal desired %T: %v", obj, err))
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[troupev1.AnnotationSpecHash] = strconv.FormatUint(h.Sum64(), 36)
	obj.SetAnnotations(ann)
	return obj
}

// The containers troupe adds to a user's pods (the launcher's troupe-wait, the git clones, a
// generated launcher) must pass the Pod Security Standard "restricted" whenever the user's
// template does, since the namespace's admission judges the whole pod. A template may set
// seccomp and runAsNonRoot per container rather than for the pod, so each added container
// says everything restricted asks for itself. It must also pass a ResourceQuota that counts
// limits, so each has requests and limits.

// RestrictedSecurityContext completes sec (a copy; nil is empty) with what the restricted
// standard requires of every container: the runtime's default seccomp profile, no privilege
// escalation and every capability dropped. It leaves the user and runAsNonRoot to the caller,
// who knows whose files the container touches.
func RestrictedSecurityContext(sec *corev1.SecurityContext) *corev1.SecurityContext {
	out := &corev1.SecurityContext{}
	if sec != nil {
		out = sec.DeepCopy()
	}
	if out.SeccompProfile == nil {
		out.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	out.AllowPrivilegeEscalation = ptr.To(false)
	out.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	return out
}

// InjectedResources are the requests and limits of a container troupe adds.
func InjectedResources(cpuRequest, memoryRequest, cpuLimit, memoryLimit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpuRequest),
			corev1.ResourceMemory: resource.MustParse(memoryRequest),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpuLimit),
			corev1.ResourceMemory: resource.MustParse(memoryLimit),
		},
	}
}

const (
	// GitSyncDest is where a git init container clones into: the root of the repository's
	// emptyDir.
	GitSyncDest = "/troupe/code"
	// gitSSHDir is where a git init container finds the repository's Secret (key "ssh", and
	// "known_hosts" when given).
	gitSSHDir = "/etc/troupe/git-ssh"

	gitContainerPrefix = "git-"
	codeVolumePrefix   = "code-"
	gitSSHVolumePrefix = "git-ssh-"
)

// CodeVolumeName is the emptyDir a repository is cloned into.
func CodeVolumeName(name string) string { return codeVolumePrefix + name }

// GitSSHVolumeName is the volume of a repository's deploy key.
func GitSSHVolumeName(name string) string { return gitSSHVolumePrefix + name }

// GitContainerName is the init container that clones repository name.
func GitContainerName(name string) string { return gitContainerPrefix + name }

// decoratePod adds, per repository, an emptyDir, the init container that clones into it, and
// its mount at mountPath (or the repository's subPath there) in every container, init
// containers included. The git init containers run first: a clone that fails stops the pod
// before it waits for anything, and the user's own init containers may use the code.
func (cs CodeSync) decoratePod(s *Spec, tmpl *corev1.PodTemplateSpec) {
	if len(cs.Repos) == 0 {
		return
	}
	sec := cloneSecurity(s, &tmpl.Spec)
	var inits []corev1.Container
	for _, r := range cs.Repos {
		volume := CodeVolumeName(r.Name)
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
			Name: volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		})
		args := []string{"git-sync", "--repo=" + r.GitRepo, "--dest=" + GitSyncDest}
		if r.GitBranch != "" {
			args = append(args, "--branch="+r.GitBranch)
		}
		mounts := []corev1.VolumeMount{{Name: volume, MountPath: GitSyncDest}}
		if r.GitSecretName != "" {
			secretVolume := GitSSHVolumeName(r.Name)
			// The Secret is mounted in this init container only; it may run as any user, so
			// its files are readable by all of the container's users.
			tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
				Name: secretVolume,
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: r.GitSecretName, DefaultMode: ptr.To[int32](0o444),
				}},
			})
			mounts = append(mounts, corev1.VolumeMount{Name: secretVolume, MountPath: gitSSHDir, ReadOnly: true})
			args = append(args, "--ssh-dir="+gitSSHDir)
		}
		inits = append(inits, corev1.Container{
			Name:                     GitContainerName(r.Name),
			Image:                    cs.Image,
			Command:                  []string{"/troupe-agent"},
			Args:                     args,
			VolumeMounts:             mounts,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			// A clone of a large repository holds pack data in memory: room for it, bounded.
			Resources:       InjectedResources("50m", "64Mi", "1", "1Gi"),
			SecurityContext: RestrictedSecurityContext(&sec),
		})
		code := corev1.VolumeMount{Name: volume, MountPath: r.MountPath, SubPath: r.SubPath}
		for i := range tmpl.Spec.Containers {
			tmpl.Spec.Containers[i].VolumeMounts = append(tmpl.Spec.Containers[i].VolumeMounts, code)
		}
		// The init containers already there (the user's, the launcher's wait); not the clones.
		for i := range tmpl.Spec.InitContainers {
			tmpl.Spec.InitContainers[i].VolumeMounts = append(tmpl.Spec.InitContainers[i].VolumeMounts, code)
		}
	}
	tmpl.Spec.InitContainers = append(inits, tmpl.Spec.InitContainers...)
}

// cloneSecurity is the security context of the git init containers. They run as the user and
// group of the pod's main container (else its first container), so the clone belongs to the
// user who runs the code and can write into it; when neither that container nor the pod names
// a user, as the agent image's non-root user 65532. They run as non-root unless that user is
// root, with no privileges and a read-only root file system (they write only to the emptyDir).
func cloneSecurity(s *Spec, pod *corev1.PodSpec) corev1.SecurityContext {
	sec := corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if len(pod.Containers) > 0 {
		c := &pod.Containers[0]
		for i := range pod.Containers {
			if pod.Containers[i].Name == s.MainContainer {
				c = &pod.Containers[i]
			}
		}
		if cs := c.SecurityContext; cs != nil {
			sec.RunAsUser, sec.RunAsGroup = copyOf(cs.RunAsUser), copyOf(cs.RunAsGroup)
		}
	}
	user := sec.RunAsUser
	if user == nil && pod.SecurityContext != nil {
		user = pod.SecurityContext.RunAsUser // inherited from the pod
	}
	if user == nil {
		user = ptr.To(agentUser)
		sec.RunAsUser = user
	}
	sec.RunAsNonRoot = ptr.To(*user != 0)
	return sec
}

// agentUser is the non-root user of the troupe-agent image.
const agentUser int64 = 65532

func copyOf[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

// isCloner reports whether name is the init container that clones one of the repositories.
func (cs CodeSync) isCloner(name string) bool {
	return slices.ContainsFunc(cs.Repos, func(r troupev1.AppCode) bool { return GitContainerName(r.Name) == name })
}

// labelRestartAttempt puts the attempt on a pod template of a job with a failure policy. Jobs
// without one get no label, so their templates (and running pods) are as they always were.
func (s *Spec) labelRestartAttempt(tmpl *corev1.PodTemplateSpec) {
	if s.RunPolicy.FailurePolicy == nil {
		return
	}
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[troupev1.LabelRestartAttempt] = strconv.Itoa(int(s.Plan.Restart.Attempt))
}

// overrides returns the overrides in force: debug mode's, else the resume overrides of a job
// that is or was paused.
func (s *Spec) overrides() *ReplicaOverrides {
	switch {
	case s.RunMode.Debug != nil:
		return s.RunMode.Debug
	case s.Plan.Pause || s.Plan.WasPaused:
		return s.RunMode.Resume
	}
	return nil
}

// applyRunMode changes a pod template of the master (ws == nil) or of a worker set as the run
// mode says. It runs after the backend's and the gang's decoration, so an override wins over
// them (for example the transport's sshd command) and skipping init containers removes the
// backend's too. The command goes to the main container; a master without one (a launcher of
// the user's with containers of other names) gets it in its first container.
func (s *Spec) applyRunMode(tmpl *corev1.PodTemplateSpec, ws *WorkerSet) {
	o := s.overrides()
	if o == nil {
		return
	}
	ov := o.Worker
	if ws == nil {
		ov = o.Master
	}
	if ov.SkipInitContainers {
		// Skipping init containers skips the job's own and the launcher's wait, never the
		// clones of appCodesToSync: without them the code's mount would be empty.
		tmpl.Spec.InitContainers = slices.DeleteFunc(tmpl.Spec.InitContainers, func(c corev1.Container) bool {
			return !s.CodeSync.isCloner(c.Name)
		})
		if len(tmpl.Spec.InitContainers) == 0 {
			tmpl.Spec.InitContainers = nil
		}
	}
	c := mainContainer(tmpl, s.MainContainer, ws == nil)
	if c == nil {
		return
	}
	if ov.Command != nil {
		c.Command = append([]string(nil), ov.Command...)
	}
	if ov.Args != nil {
		c.Args = append([]string(nil), ov.Args...)
		if len(c.Args) == 0 {
			c.Args = nil
		}
	}
}

// ExitCodeFailurePolicy adds to policy (nil: none yet) the rules of a pod that restarts by exit
// code (kubeflow's restartPolicy ExitCode): an exit of its main container (the one named
// mainContainer, else the template's first, as in kubeflow) from 1 to 127 is the program's own
// failure and fails the Job at once; 128 and above (killed by a signal: preempted, out of
// memory) is retried within the backoff limit.
func ExitCodeFailurePolicy(policy *batchv1.PodFailurePolicy, tmpl *corev1.PodTemplateSpec, mainContainerName string) *batchv1.PodFailurePolicy {
	main := mainContainer(tmpl, mainContainerName, true)
	if main == nil {
		return policy
	}
	out := &batchv1.PodFailurePolicy{}
	if policy != nil {
		out = policy.DeepCopy()
	}
	codes := make([]int32, 0, 127)
	for c := int32(1); c <= 127; c++ {
		codes = append(codes, c)
	}
	out.Rules = append(out.Rules, batchv1.PodFailurePolicyRule{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(main.Name),
			Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
			Values:        codes,
		},
	})
	return out
}
