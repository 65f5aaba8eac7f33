package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// certFileWriter does for an operator running outside a pod what the kubelet does for a mounted
// Secret: it keeps the webhook certificate files in dir equal to the Secret the certificate
// rotator writes, so the rotator sees its certificate mounted and the webhook server (which
// watches its files) serves the current one.
type certFileWriter struct {
	reader client.Reader
	key    types.NamespacedName
	dir    string
}

// certSyncPeriod is how often the files are compared with the Secret (as a watch keeps it:
// certscope.Cache, no request); the kubelet syncs mounted Secrets about every minute, the
// rotator renews long before expiry, and a first certificate should be served within seconds.
const certSyncPeriod = 2 * time.Second

// NeedLeaderElection is false: every replica serves the webhooks, so every replica needs the
// files.
func (w *certFileWriter) NeedLeaderElection() bool { return false }

// Start copies the certificate until ctx ends.
func (w *certFileWriter) Start(ctx context.Context) error {
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return err
	}
	log := ctrl.Log.WithName("cert-files")
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		var s corev1.Secret
		if err := w.reader.Get(ctx, w.key, &s); err != nil {
			log.V(1).Info("reading the certificate Secret", "error", err.Error())
			return
		}
		for _, name := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if err := writeIfChanged(filepath.Join(w.dir, name), s.Data[name]); err != nil {
				log.Error(err, "writing the webhook certificate", "file", name)
			}
		}
	}, certSyncPeriod)
	return nil
}

// writeIfChanged replaces path with data atomically, unless data is empty or already there.
func writeIfChanged(path string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// waitForCertFiles closes ready once dir holds a serving certificate and its key (put there by
// another issuer: a mounted Secret, or certFileWriter), polling until ctx ends.
func waitForCertFiles(ctx context.Context, dir string, ready chan<- struct{}) {
	log := ctrl.Log.WithName("cert-files")
	_ = wait.PollUntilContextCancel(ctx, certSyncPeriod, true, func(context.Context) (bool, error) {
		for _, name := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if !nonEmptyFile(filepath.Join(dir, name)) {
				return false, nil
			}
		}
		log.Info("serving the webhook certificate another issuer made", "dir", dir)
		close(ready)
		return true, nil
	})
}

// nonEmptyFile says path is a file with something in it (a missing one is not).
func nonEmptyFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Size() > 0
}

// removeCertFiles deletes the certificate files in dir, if any.
func removeCertFiles(dir string) error {
	for _, name := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the stale webhook certificate: %w", err)
		}
	}
	return nil
}
