package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// checkSecrets reports each required Secret that is missing or lacks a key, with the field
// that names it. The user's Secrets carry none of our labels, so the operator's cache does not
// hold them: they are read from the API server, and read again on a timer while a problem
// lasts (no watch event tells when the user fixes it).
func (r *Reconciler) checkSecrets(ctx context.Context, s *Spec) ([]string, error) {
	var problems []string
	for _, req := range s.RequiredSecrets {
		var secret corev1.Secret
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: req.Name}, &secret)
		switch {
		case apierrors.IsNotFound(err):
			problems = append(problems, fmt.Sprintf("%s: Secret %q not found; create it with the keys %s",
				req.Field, req.Name, strings.Join(req.Keys, ", ")))
			continue
		case err != nil:
			return nil, fmt.Errorf("get Secret %s: %w", req.Name, err)
		}
		var lacking []string
		for _, k := range req.Keys {
			if len(secret.Data[k]) == 0 {
				lacking = append(lacking, k)
			}
		}
		if len(lacking) > 0 {
			problems = append(problems, fmt.Sprintf("%s: Secret %q lacks the keys %s", req.Field, req.Name, strings.Join(lacking, ", ")))
		}
	}
	return problems, nil
}

// The Secrets the operator generates for a job (its SSH keys) are written once and never
// rewritten. Their hash goes into status.generatedSecrets, where users who may edit the job
// (but not its status) cannot change it, before the Secret is created: so a Secret found under
// the name without a record (someone with Secret create rights was quicker, putting the job's
// labels and even a controller reference on it, which anyone may write) is never taken for the
// operator's own, nor adopted. A Secret whose data no longer matches is reported
// (SecretTampered condition, Warning event) and no missing child is created meanwhile, so no
// launcher starts with keys someone else put there. A generated Secret deleted after the job
// started fails the job: new keys would not match the host key and authorized keys the running
// pods hold. Deleted before the job started, it is generated again (docs/security.md).
//
// The data is read only when the Secret's resourceVersion moved since it was last verified, and
// then from the API server, so this works with a cache that holds Secrets' metadata only.

// SecretIntegrity is what one reconcile verified of the job's generated Secrets.
type SecretIntegrity struct {
	// checked says the Secrets were verified; a finished job's are not, and its status keeps
	// the previous records.
	checked bool
	// Records are the generated Secrets as verified or written on this reconcile.
	Records []troupev1.GeneratedSecretRecord
	// Tampered name the Secrets whose data is not what the operator wrote.
	Tampered []string
	// Lost name the Secrets deleted after the job started.
	Lost []string
}

// blocksCreation says no missing child may be created: a master started now would use foreign
// keys, or keys the workers do not have.
func (si *SecretIntegrity) blocksCreation() bool { return len(si.Tampered) > 0 || len(si.Lost) > 0 }

// holdSuspended keeps a suspended master Job suspended while the generated Secrets cannot be
// trusted, so resuming the job does not start a launcher with them. A running master is left
// alone: it started with the keys troupe wrote.
func (si *SecretIntegrity) holdSuspended(cur, want *batchv1.Job) {
	if si.blocksCreation() && ptr.Deref(cur.Spec.Suspend, false) {
		want.Spec.Suspend = ptr.To(true)
	}
}

// created records a Secret the engine just created with generated data.
func (si *SecretIntegrity) created(obj client.Object) {
	secret, ok := obj.(*corev1.Secret)
	if !ok || !si.checked {
		return
	}
	si.Records = append(si.Records, troupev1.GeneratedSecretRecord{
		Name: secret.Name, SHA256: secretDataHash(secret.Data), ResourceVersion: secret.ResourceVersion,
	})
}

// records is status.generatedSecrets: what was verified now, else the previous records.
func (si *SecretIntegrity) records(prev *troupev1.JobStatus) []troupev1.GeneratedSecretRecord {
	if !si.checked {
		return prev.GeneratedSecrets
	}
	return sortedRecords(slices.Clone(si.Records))
}

// sortedRecords is recs sorted by Secret name, as status.generatedSecrets holds them.
func sortedRecords(recs []troupev1.GeneratedSecretRecord) []troupev1.GeneratedSecretRecord {
	slices.SortFunc(recs, func(a, b troupev1.GeneratedSecretRecord) int { return strings.Compare(a.Name, b.Name) })
	return recs
}

// secretRecord is the status's record of the generated Secret name, or nil.
func secretRecord(st *troupev1.JobStatus, name string) *troupev1.GeneratedSecretRecord {
	if i := slices.IndexFunc(st.GeneratedSecrets, func(g troupev1.GeneratedSecretRecord) bool { return g.Name == name }); i >= 0 {
		return &st.GeneratedSecrets[i]
	}
	return nil
}

// verifyGeneratedSecrets compares each generated Secret of the job with its record in the
// job's status. A Secret without a record is not the operator's (Reconciler.recordSecret): it is
// reported like a modified one.
// ids are the job's desired children (childIdentities).
func (r *Reconciler) verifyGeneratedSecrets(ctx context.Context, job Object, ids []client.Object, obs *Observed) error {
	obs.Secrets.checked = true
	prev := job.JobStatus()
	started := prev.StartTime != nil || jobHasLivePods(obs)
	for _, want := range ids {
		if _, ok := want.(*corev1.Secret); !ok {
			continue
		}
		name := want.GetName()
		rec := secretRecord(prev, name)
		cur, exists := obs.current[keyOf(want)]
		if exists && rec != nil && rec.ResourceVersion == cur.GetResourceVersion() {
			obs.Secrets.Records = append(obs.Secrets.Records, *rec)
			r.secretVersions.recorded(job, name)
			continue
		}
		if exists && rec != nil && r.secretVersions.verified(job, name) == cur.GetResourceVersion() {
			verified := *rec // the status does not record its resourceVersion yet (progressOnly)
			verified.ResourceVersion = cur.GetResourceVersion()
			obs.Secrets.Records = append(obs.Secrets.Records, verified)
			continue
		}
		var fresh corev1.Secret
		if exists {
			err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), &fresh)
			if client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("get Secret %s: %w", name, err)
			}
			exists = err == nil && (metav1.IsControlledBy(&fresh, job) || obs.isOrphan(want)) // act adopts an orphan
		}
		switch {
		case !exists && rec != nil && started && !slices.Contains(obs.Conflicts, keyOf(want)):
			obs.Secrets.Lost = append(obs.Secrets.Lost, name)
			obs.Secrets.Records = append(obs.Secrets.Records, *rec)
		case !exists:
			// Not created yet, or deleted before any pod got its keys: it is generated (again).
		case rec == nil:
			obs.Secrets.Tampered = append(obs.Secrets.Tampered, name)
		case rec.SHA256 == secretDataHash(fresh.Data):
			obs.Secrets.Records = append(obs.Secrets.Records, troupev1.GeneratedSecretRecord{
				Name: name, SHA256: secretDataHash(fresh.Data), ResourceVersion: fresh.ResourceVersion,
			})
			r.secretVersions.note(job, &fresh)
		default:
			obs.Secrets.Tampered = append(obs.Secrets.Tampered, name)
			obs.Secrets.Records = append(obs.Secrets.Records, *rec)
		}
	}
	return nil
}

// withSecretRecord is st with the record of secret, just generated and not created yet, in
// place of any earlier record of its name: written before the Secret is created
// (Reconciler.recordSecret), so that only data the operator generated ever matches a record.
func withSecretRecord(st troupev1.JobStatus, secret *corev1.Secret) troupev1.JobStatus {
	rec := troupev1.GeneratedSecretRecord{Name: secret.Name, SHA256: secretDataHash(secret.Data)}
	st.GeneratedSecrets = slices.DeleteFunc(slices.Clone(st.GeneratedSecrets),
		func(g troupev1.GeneratedSecretRecord) bool { return g.Name == rec.Name })
	st.GeneratedSecrets = sortedRecords(append(st.GeneratedSecrets, rec))
	return st
}

// adoptableSecret reports whether the generated Secret want, found without an owner reference,
// holds what the operator recorded for it: only then is it the job's to adopt back. The data is
// read from the API server (the cache holds Secrets' metadata only); this runs only for such
// an orphan.
func (r *Reconciler) adoptableSecret(ctx context.Context, job Object, want client.Object) (bool, error) {
	rec := secretRecord(job.JobStatus(), want.GetName())
	if rec == nil {
		return false, nil
	}
	var fresh corev1.Secret
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), &fresh); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return rec.SHA256 == secretDataHash(fresh.Data), nil
}

// secretDataHash is the hex SHA-256 of a Secret's data: each key and value in key order,
// length-prefixed so that no two different maps hash alike.
func secretDataHash(data map[string][]byte) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		writeField(h, []byte(k))
		writeField(h, data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeField(h hash.Hash, b []byte) {
	_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
	_, _ = h.Write(b)
}

// secretTamperedCondition is True while a generated Secret holds foreign data. It is added
// only to a job whose Secret was changed, and stays, False, once the data is put back.
func secretTamperedCondition(obs *Observed, prev *troupev1.JobStatus) (metav1.Condition, bool) {
	const t = troupev1.ConditionSecretTampered
	if !obs.Secrets.checked {
		return metav1.Condition{}, false
	}
	if len(obs.Secrets.Tampered) > 0 {
		return newCondition(t, true, troupev1.ReasonGeneratedSecretModified,
			"the data of Secret "+strings.Join(obs.Secrets.Tampered, ", ")+
				" is not what troupe generated for this job (status.generatedSecrets); troupe starts no launcher with these keys. "+
				"Put the data back; or, if the job has not started, delete the Secret and troupe generates it again; "+
				"else delete the job and create it again for new keys"), true
	}
	if meta.FindStatusCondition(prev.Conditions, t) == nil {
		return metav1.Condition{}, false
	}
	return newCondition(t, false, troupev1.ReasonGeneratedSecretIntact, "the generated Secrets hold what troupe wrote"), true
}

// secretLostCondition is the Failed condition of a job whose generated Secret was deleted
// after it started.
func secretLostCondition(obs *Observed, prev *troupev1.JobStatus) (metav1.Condition, bool) {
	if len(obs.Secrets.Lost) == 0 || prev.Phase.Ended() {
		return metav1.Condition{}, false
	}
	return newCondition(troupev1.ConditionFailed, true, troupev1.ReasonGeneratedSecretDeleted,
		"Secret "+strings.Join(obs.Secrets.Lost, ", ")+" that troupe generated for this job was deleted after the job started; "+
			"new keys would not match the ones its pods hold, so the job fails. Delete the job and create it again to rerun it"), true
}

// secretVersions remembers, per job, the resourceVersion at which this process created or last
// verified each generated Secret, until the job's status records it. A status change that only
// records it may wait for the job's next change (progressOnly); meanwhile the passes know the
// Secret unchanged from it, without reading its data again. An entry goes once the status
// records the version, or with its job (Reconciler.forget); after a restart the Secret is read
// once, as before. The zero value is ready to use.
type secretVersions struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]jobSecretVersions
}

type jobSecretVersions struct {
	uid types.UID         // a job deleted and created again under its name starts afresh
	rv  map[string]string // by Secret name
}

// note remembers that the job's generated Secret, as created or verified, has the data recorded.
func (v *secretVersions) note(job Object, secret metav1.Object) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := client.ObjectKeyFromObject(job)
	e, ok := v.jobs[key]
	if !ok || e.uid != job.GetUID() {
		if v.jobs == nil {
			v.jobs = map[types.NamespacedName]jobSecretVersions{}
		}
		e = jobSecretVersions{uid: job.GetUID(), rv: map[string]string{}}
		v.jobs[key] = e
	}
	e.rv[secret.GetName()] = secret.GetResourceVersion()
}

// verified is the resourceVersion noted for the job's Secret name, "" if none.
func (v *secretVersions) verified(job Object, name string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.jobs[client.ObjectKeyFromObject(job)]
	if !ok || e.uid != job.GetUID() {
		return ""
	}
	return e.rv[name]
}

// recorded drops the note of the job's Secret name: the status records its version.
func (v *secretVersions) recorded(job Object, name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := client.ObjectKeyFromObject(job)
	if e, ok := v.jobs[key]; ok {
		delete(e.rv, name)
		if len(e.rv) == 0 {
			delete(v.jobs, key)
		}
	}
}

// forget drops every note of the job.
func (v *secretVersions) forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.jobs, key)
}
