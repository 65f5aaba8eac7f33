package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// restoreSchedulingDirectives carries the master template's scheduling fields (nodeSelector,
// tolerations, affinity, scheduling gates; labels and annotations with a queue's placement) into
// a master Job that is suspended and has never
// started, the one state in which the API server lets them change (as Kueue relies on). A
// job's templates may change only while it is suspended (webhooks/update.go), so this is how
// the placement a user or a queueing system chose reaches the launcher when the job resumes;
// the same update may unsuspend the Job. It reports whether it changed anything.
func restoreSchedulingDirectives(cur, want *batchv1.Job) bool {
	if cur.Spec.Suspend == nil || !*cur.Spec.Suspend || cur.Status.StartTime != nil {
		return false
	}
	c, w := &cur.Spec.Template.Spec, &want.Spec.Template.Spec
	placed := !equality.Semantic.DeepEqual(c.NodeSelector, w.NodeSelector) ||
		!equality.Semantic.DeepEqual(c.Tolerations, w.Tolerations) ||
		!equality.Semantic.DeepEqual(c.Affinity, w.Affinity) ||
		!equality.Semantic.DeepEqual(c.SchedulingGates, w.SchedulingGates)
	// Labels and annotations follow only a queueing system's placement (a changed scheduling
	// field, or Kueue's or a provisioning check's marks): Kueue's TAS and admission checks find
	// pods by theirs. Otherwise the Job's are left as they are, so that a new operator release
	// never rewrites a waiting job's Job for labels of its own. They are added, never removed:
	// the API server added the Job's own (controller-uid, job-name).
	cm, wm := &cur.Spec.Template.ObjectMeta, &want.Spec.Template.ObjectMeta
	carryMeta := (placed || queueMarked(wm.Labels) || queueMarked(wm.Annotations)) &&
		(!hasAll(cm.Labels, wm.Labels) || !hasAll(cm.Annotations, wm.Annotations))
	if !placed && !carryMeta {
		return false
	}
	c.NodeSelector, c.Tolerations, c.Affinity, c.SchedulingGates = w.NodeSelector, w.Tolerations, w.Affinity, w.SchedulingGates
	if carryMeta {
		cm.Labels, cm.Annotations = withAll(cm.Labels, wm.Labels), withAll(cm.Annotations, wm.Annotations)
	}
	return true
}

// queueMarked says m holds a key of Kueue's (kueue.x-k8s.io/: TAS's pod set label, workload
// annotation) or of a provisioning admission check's (autoscaling.x-k8s.io/).
func queueMarked(m map[string]string) bool {
	for k := range m {
		if strings.HasPrefix(k, "kueue.x-k8s.io/") || strings.HasPrefix(k, "autoscaling.x-k8s.io/") {
			return true
		}
	}
	return false
}

// hasAll says m has every key of want with its value.
func hasAll(m, want map[string]string) bool {
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// withAll is m with every key of want set to its value.
func withAll(m, want map[string]string) map[string]string {
	if len(want) == 0 {
		return m
	}
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, want)
	return m
}

// childType is one type of object a job may have as a child. The table below is the one list of
// them: the reconciler watches each (SetupWithManager), the cache holds each only when it is
// troupe's (CacheOptions), and restore puts an owned one back in shape with its restoreSpec.
// A new child type is a line here; the gang providers' PodGroups, whose CRDs a cluster may not
// serve, are added beside them at run time (NewReconciler's owned, Gang.Restore).
type childType struct {
	// object is an empty object of the type.
	object client.Object
	// metadataOnly types are watched and cached as metadata (ownedSecret): their data never
	// enters the operator's memory.
	metadataOnly bool
	// progressDelayed types have a controller that counts their pods in their status: an
	// update that only counts the pods' progress wakes the job a moment later (childWakeups).
	progressDelayed bool
	// restoreSpec puts the fields the engine manages of an owned child (cur) back to the
	// desired ones (want, of the same type) and reports whether it changed anything; nil: the
	// engine manages the type's labels and spec hash only.
	restoreSpec func(cur, want client.Object) bool
	// trim is the cache's transform beyond trimUnlessTroupes (which every type gets): what of
	// the job's own children of the type it drops.
	trim func(client.Object)
}

var childTypes = []childType{
	{object: &batchv1.Job{}, progressDelayed: true, restoreSpec: restoreJob, trim: trimJob},
	{object: &appsv1.StatefulSet{}, progressDelayed: true, restoreSpec: restoreStatefulSet, trim: trimStatefulSet},
	{object: &corev1.Service{}, restoreSpec: restoreService},
	{object: &corev1.ConfigMap{}, restoreSpec: restoreConfigMap, trim: trimConfigMap},
	// A Secret's data is generated once (Generator) and never rewritten.
	{object: &corev1.Secret{}, metadataOnly: true},
	// A ServiceAccount has nothing the engine manages beyond its labels.
	{object: &corev1.ServiceAccount{}},
	{object: &rbacv1.Role{}, restoreSpec: restoreRole},
	{object: &rbacv1.RoleBinding{}, restoreSpec: restoreRoleBinding},
	{object: &policyv1.PodDisruptionBudget{}, restoreSpec: restorePodDisruptionBudget},
	{object: &networkingv1.NetworkPolicy{}, restoreSpec: restoreNetworkPolicy},
	// An elastic PyTorchJob's autoscaler (elasticPolicy.metrics; the torch backend's).
	{object: &autoscalingv2.HorizontalPodAutoscaler{}, restoreSpec: restoreHorizontalPodAutoscaler},
}

// WatchedChildren are the objects, one per type, by which the engine's reconcilers watch a job's
// pods and children (as the cache holds them: Secrets metadata-only); the jobs themselves are
// the kinds'. The bench's watch floor (test/bench/watchfloor) watches these.
func WatchedChildren() []client.Object {
	out := []client.Object{&corev1.Pod{}}
	for _, t := range childTypes {
		out = append(out, t.cacheObject())
	}
	return out
}

// cacheObject is the object the cache and the watch know the type by.
func (t childType) cacheObject() client.Object {
	if t.metadataOnly {
		return ownedSecret()
	}
	return t.object
}

// childTypeOf is the child type of obj's Go type, or nil.
func childTypeOf(obj client.Object) *childType {
	ot := reflect.TypeOf(obj)
	for i := range childTypes {
		if reflect.TypeOf(childTypes[i].object) == ot {
			return &childTypes[i]
		}
	}
	return nil
}

// restoreSpecOf is the restoreSpec of want's type, or nil.
func restoreSpecOf(want client.Object) func(cur, want client.Object) bool {
	if t := childTypeOf(want); t != nil {
		return t.restoreSpec
	}
	return nil
}

func restoreStatefulSet(cur, want client.Object) bool {
	c, w := cur.(*appsv1.StatefulSet), want.(*appsv1.StatefulSet)
	changed := false
	if !equality.Semantic.DeepEqual(c.Spec.Replicas, w.Spec.Replicas) {
		c.Spec.Replicas = w.Spec.Replicas
		changed = true
	}
	if c.Spec.UpdateStrategy.Type != w.Spec.UpdateStrategy.Type {
		// A StatefulSet of an older release rolls its pods on a template change.
		c.Spec.UpdateStrategy = w.Spec.UpdateStrategy
		changed = true
	}
	return restoreTemplate(c, w) || changed
}

// restoreJob puts back what may change of a master or worker Job: suspend and a suspended
// Job's scheduling directives. Its pod template cannot change: a worker Job whose template
// changed is replaced (holdChild).
func restoreJob(cur, want client.Object) bool {
	c, w := cur.(*batchv1.Job), want.(*batchv1.Job)
	changed := restoreSchedulingDirectives(c, w)
	if !equality.Semantic.DeepEqual(c.Spec.Suspend, w.Spec.Suspend) {
		c.Spec.Suspend = w.Spec.Suspend
		changed = true
	}
	return changed
}

// isWorkerJob says a Job is a worker set's (it carries the worker-set label), not the master's.
func isWorkerJob(j *batchv1.Job) bool { return j.Labels[troupev1.LabelWorkerSet] != "" }

func restoreService(cur, want client.Object) bool {
	c, w := cur.(*corev1.Service), want.(*corev1.Service)
	if maps.Equal(c.Spec.Selector, w.Spec.Selector) && c.Spec.PublishNotReadyAddresses == w.Spec.PublishNotReadyAddresses {
		return false
	}
	c.Spec.Selector = w.Spec.Selector
	c.Spec.PublishNotReadyAddresses = w.Spec.PublishNotReadyAddresses
	return true
}

// restoreConfigMap puts the ConfigMap's data back to want's. cur may be as the cache holds it
// (trimConfigMap: each value its hash) or as read whole; the patch of the held form (heldInPart)
// replaces every value and removes the keys want lacks.
func restoreConfigMap(cur, want client.Object) bool {
	c, w := cur.(*corev1.ConfigMap), want.(*corev1.ConfigMap)
	if maps.Equal(c.Data, w.Data) || maps.EqualFunc(c.Data, w.Data, func(held, wanted string) bool { return held == heldValue(wanted) }) {
		return false
	}
	c.Data = w.Data
	return true
}

// trimConfigMap holds each value of a job's ConfigMap (the hostfile, the transport's files, the
// discovery script: some KiB a job) as its hash (heldValue): the engine only compares them with
// what the job wants (restoreConfigMap), and the launcher and workers read the files, not the
// operator. 1,000 jobs held 6 MB of them (docs/performance.md, "Memory").
func trimConfigMap(obj client.Object) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		for k, v := range cm.Data {
			cm.Data[k] = heldValue(v)
		}
	}
}

// heldValue is how the cache holds a value of a job's ConfigMap: its SHA-256, which no value
// the engine writes equals (so a value held this way is never taken for the value itself).
func heldValue(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func restoreRole(cur, want client.Object) bool {
	c, w := cur.(*rbacv1.Role), want.(*rbacv1.Role)
	if equality.Semantic.DeepEqual(c.Rules, w.Rules) {
		return false
	}
	c.Rules = w.Rules
	return true
}

func restoreRoleBinding(cur, want client.Object) bool {
	c, w := cur.(*rbacv1.RoleBinding), want.(*rbacv1.RoleBinding)
	if equality.Semantic.DeepEqual(c.Subjects, w.Subjects) {
		return false
	}
	c.Subjects = w.Subjects
	return true
}

// restoreNetworkPolicy puts the policy's spec back to want's: a policy edited to let other pods
// in is closed again.
func restoreNetworkPolicy(curObj, wantObj client.Object) bool {
	cur, want := curObj.(*networkingv1.NetworkPolicy), wantObj.(*networkingv1.NetworkPolicy)
	if equality.Semantic.DeepEqual(cur.Spec, want.Spec) {
		return false
	}
	cur.Spec = want.Spec
	return true
}

// restoreHorizontalPodAutoscaler puts the autoscaler's target, bounds and metrics back to
// want's (its behavior, which the job does not say, stays as the user or the API server left it).
func restoreHorizontalPodAutoscaler(curObj, wantObj client.Object) bool {
	cur, want := curObj.(*autoscalingv2.HorizontalPodAutoscaler), wantObj.(*autoscalingv2.HorizontalPodAutoscaler)
	if cur.Spec.ScaleTargetRef == want.Spec.ScaleTargetRef && ptr.Equal(cur.Spec.MinReplicas, want.Spec.MinReplicas) &&
		cur.Spec.MaxReplicas == want.Spec.MaxReplicas && equality.Semantic.DeepEqual(cur.Spec.Metrics, want.Spec.Metrics) {
		return false
	}
	cur.Spec.ScaleTargetRef, cur.Spec.MinReplicas = want.Spec.ScaleTargetRef, want.Spec.MinReplicas
	cur.Spec.MaxReplicas, cur.Spec.Metrics = want.Spec.MaxReplicas, want.Spec.Metrics
	return true
}

// restorePodDisruptionBudget puts the budget's minAvailable and selector back to want's.
func restorePodDisruptionBudget(curObj, wantObj client.Object) bool {
	cur, want := curObj.(*policyv1.PodDisruptionBudget), wantObj.(*policyv1.PodDisruptionBudget)
	if equality.Semantic.DeepEqual(cur.Spec.MinAvailable, want.Spec.MinAvailable) &&
		equality.Semantic.DeepEqual(cur.Spec.Selector, want.Spec.Selector) && cur.Spec.MaxUnavailable == nil {
		return false
	}
	cur.Spec.MinAvailable, cur.Spec.Selector, cur.Spec.MaxUnavailable = want.Spec.MinAvailable, want.Spec.Selector, nil
	return true
}

// restoreTemplate writes want's pod template into cur when its hash differs (and holdTemplate
// did not hold it back). The template is compared by hash, not field by field, so defaults
// the API server filled in never cause a write. A StatefulSet written by a release that
// recorded no template hash counts as different.
func restoreTemplate(cur, want *appsv1.StatefulSet) bool {
	if !templateChanged(cur, want) {
		return false
	}
	wantHash, ok := want.Annotations[troupev1.AnnotationTemplateHash]
	cur.Spec.Template = want.Spec.Template
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	if ok {
		cur.Annotations[troupev1.AnnotationTemplateHash] = wantHash
	} else {
		delete(cur.Annotations, troupev1.AnnotationTemplateHash)
	}
	return true
}

// setTemplateHash records on a worker set's StatefulSet or Job (obj) the hash of its pod
// template as built.
func setTemplateHash(obj metav1.Object, tmpl *corev1.PodTemplateSpec) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[troupev1.AnnotationTemplateHash] = templateHash(tmpl)
	obj.SetAnnotations(annotations)
}

// hashOf is a hash of a pod template given what it was made from (a set's template hash).
func hashOf(from string, tmpl *corev1.PodTemplateSpec) string {
	data, err := json.Marshal(tmpl)
	if err != nil {
		// The template was built from typed API structs, which always marshal.
		panic(fmt.Sprintf("marshal pod template: %v", err))
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(from))
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 36)
}

// templateHash is a hash of a pod template.
//
// The common job-name label is left out: it came in v0.2.0, after the templates of running
// jobs were written, and a template that differs from theirs by that label alone is the same
// to the pods. So an upgrade holds back no template and replaces no worker Job for it; those
// jobs' pods go on without the label.
func templateHash(tmpl *corev1.PodTemplateSpec) string {
	if _, ok := tmpl.Labels[troupev1.LabelJobName]; ok {
		tmpl = tmpl.DeepCopy()
		delete(tmpl.Labels, troupev1.LabelJobName)
	}
	return hashOf("", tmpl)
}

// templateChanged says a worker set's child (cur) carries another pod template than want's, by
// their recorded hashes (a child written by a release that recorded none counts as changed).
func templateChanged(cur, want metav1.Object) bool {
	wantHash, ok := want.GetAnnotations()[troupev1.AnnotationTemplateHash]
	curHash, has := cur.GetAnnotations()[troupev1.AnnotationTemplateHash]
	return has != ok || curHash != wantHash
}

// ownedSecret is how the engine watches and reads the Secrets it generates: metadata only. It
// writes their data once, at creation, and never reads it back; it needs their owner, labels
// and annotations to tell ours from a foreign object of the same name and to keep the labels.
// A user's Secret named in a spec is read with an uncached GET (checkSecrets).
func ownedSecret() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// trimJob keeps of a worker Job's pod template its outline (templateOutline): its labels
// (the restart attempt), its containers' names, its scheduling directives; the pass compares the
// Job with what the job wants by its annotations, and patches what it changes (heldInPart). A
// set of 500 workers with a template of 100 KiB costs the cache a few hundred KiB, not 50 MiB.
// The master Job's template is held as masterTemplateRead.
func trimJob(obj client.Object) {
	j, ok := obj.(*batchv1.Job)
	switch {
	case !ok:
	case isWorkerJob(j):
		j.Spec.Template = outlineRead(&j.Spec.Template)
	default:
		j.Spec.Template = masterTemplateRead(&j.Spec.Template)
	}
}

// masterTemplateRead is what the engine reads of the master Job's pod template: its labels (the
// attempt) and annotations whole (restoreSchedulingDirectives adds a queue's to them), the
// scheduling directives, the restart policies (restartsInPlace) and the init containers' names
// (launcherWaits). The containers' commands, environment and volumes (the most of a launcher's
// template) are not: the Job's template cannot change but for those directives, so the engine
// never rewrites the rest, and patches what it changes (heldInPart). What it adds to the outline
// it shares with t, which the cache hands over to the transform.
func masterTemplateRead(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	out := templateOutline(t)
	out.Labels, out.Annotations = sharedMap(t.Labels), maps.Clone(t.Annotations)
	out.Spec.RestartPolicy = t.Spec.RestartPolicy
	for i, c := range t.Spec.Containers {
		out.Spec.Containers[i].RestartPolicy = c.RestartPolicy
		out.Spec.Containers[i].RestartPolicyRules = c.RestartPolicyRules
	}
	for _, c := range t.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy})
	}
	return out
}

// trimStatefulSet keeps of a worker StatefulSet's pod template its outline with the labels the
// engine reads (outlineRead: the restart attempt): the template is compared with the wanted one
// by its hash (templateChanged), and a StatefulSet whose template must be rewritten is read whole
// from the API server first (act), so the cache need not hold it.
func trimStatefulSet(obj client.Object) {
	if sts, ok := obj.(*appsv1.StatefulSet); ok {
		sts.Spec.Template = outlineRead(&sts.Spec.Template)
	}
}

// outlineRead is how the cache holds a worker Job's or StatefulSet's pod template: its outline
// (templateOutline), of its labels only those the engine reads (labelsRead).
func outlineRead(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	out := templateOutline(t)
	out.Labels = labelsRead(t.Labels)
	return out
}

// templateOutline is what a worker Job's pod template is compared and kept in shape by (the
// rest is in the set's hash): its labels, its containers by name (an index adds to them), and
// the scheduling directives the engine puts back into a suspended Job (restoreJob). The
// operator's cache holds a worker Job's template as no more than this (trimJob). What it keeps
// is hashed into every worker Job's AnnotationIndexedTemplateHash: a field added here would
// replace every running worker Job after an upgrade.
func templateOutline(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	out := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(t.Labels)},
		Spec: corev1.PodSpec{
			NodeSelector:    t.Spec.NodeSelector,
			Tolerations:     t.Spec.Tolerations,
			Affinity:        t.Spec.Affinity,
			SchedulingGates: t.Spec.SchedulingGates,
		},
	}
	for _, c := range t.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name})
	}
	return *out.DeepCopy()
}

// markManaged labels a child with the label the operator's caches select it by. It is added
// after the spec hash is taken: it says who manages the child, not what the job wants, so
// adding it to the children of a job created by an older release writes their labels and never
// rewrites a running StatefulSet's template.
func markManaged(o client.Object) {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[troupev1.LabelManagedBy] = troupev1.ManagedByTroupe
	o.SetLabels(labels)
}

func (s *Spec) childMeta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       s.Namespace,
		Labels:          maps.Clone(labels),
		OwnerReferences: []metav1.OwnerReference{s.Owner},
	}
}

// JobLabels are the labels every child and pod of the job carries.
func (s *Spec) JobLabels() map[string]string {
	return map[string]string{
		s.NameLabel:           s.Name,
		troupev1.LabelJobName: s.Name,
		troupev1.LabelJobUID:  string(s.Owner.UID),
	}
}

// labelsRead keeps of an object's labels those the engine reads (troupev1.LabelsRead: the job
// UID, role, worker set, restart attempt, the kind's name label); a tenant's own labels, also
// those under troupe.dev, are not held.
func labelsRead(labels map[string]string) map[string]string {
	n := 0
	for _, k := range troupev1.LabelsRead {
		if _, ok := labels[k]; ok {
			n++
		}
	}
	// Sized to what it holds: a map made for more than 8 entries (LabelsRead names 9) takes
	// twice the memory of one for 8 or fewer, and a pod carries 5 or 6 of them.
	kept := make(map[string]string, n)
	for _, k := range troupev1.LabelsRead {
		if v, ok := labels[k]; ok {
			kept[k] = shared(v)
		}
	}
	return kept
}

// shared is s as the one copy the cache holds of it. A job's objects and pods repeat the same
// strings (the namespace, the job's name and UID in their labels and owner references, roles,
// set and node names): decoded, each object has copies of its own; held shared, a job's 9 pods
// and 6 children hold each once (docs/performance.md, "Memory"). unique keeps a string's entry
// only while it is in use, so names of objects long gone are not kept.
func shared(s string) string { return unique.Make(s).Value() }

// sharedMap is m with its keys and values shared.
func sharedMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[shared(k)] = shared(v)
	}
	return out
}

// sharedRefs are refs with their strings shared (in place).
func sharedRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for i := range refs {
		r := &refs[i]
		r.APIVersion, r.Kind, r.Name, r.UID = shared(r.APIVersion), shared(r.Kind), shared(r.Name), types.UID(shared(string(r.UID)))
	}
	return refs
}
