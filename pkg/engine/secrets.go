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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// secretIntegrity is what one reconcile verified of the job's generated Secrets.
type secretIntegrity struct {
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
func (si *secretIntegrity) blocksCreation() bool { return len(si.Tampered) > 0 || len(si.Lost) > 0 }

// holdSuspended keeps a suspended master Job suspended while the generated Secrets cannot be
// trusted, so resuming the job does not start a launcher with them. A running master is left
// alone: it started with the keys troupe wrote.
func (si *secretIntegrity) holdSuspended(cur, want *batchv1.Job) {
	if si.blocksCreation() && ptr.Deref(cur.Spec.Suspend, false) {
		want.Spec.Suspend = ptr.To(true)
	}
}

// created records a Secret the engine just created with generated data.
func (si *secretIntegrity) created(obj client.Object) {
	secret, ok := obj.(*corev1.Secret)
	if !ok || !si.checked {
		return
	}
	si.Records = append(si.Records, troupev1.GeneratedSecretRecord{
		Name: secret.Name, SHA256: secretDataHash(secret.Data), ResourceVersion: secret.ResourceVersion,
	})
}

// records is status.generatedSecrets: what was verified now, else the previous records.
func (si *secretIntegrity) records(prev *troupev1.JobStatus) []troupev1.GeneratedSecretRecord {
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
