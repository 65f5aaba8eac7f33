package mpi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// With a Secret of the user's (ssh.secretName), every container finds the user's key and
// authorized_keys beside the job's generated host key and known_hosts, in one directory, and
// the launcher's ssh uses the user's key.
func TestSSHWithTheUsersSecret(t *testing.T) {
	s := chainerSpec()
	ssh := SSH{SecretName: "my-ssh"}
	b := Backend{Transport: ssh}
	tmpl := template("chainer")
	b.DecoratePod(s, &s.WorkerSets[0], &tmpl)

	var got *corev1.Volume
	for i := range tmpl.Spec.Volumes {
		if tmpl.Spec.Volumes[i].Name == sshVolumeName {
			got = &tmpl.Spec.Volumes[i]
		}
	}
	want := corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(sshModeRoot),
		Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: SSHSecretName(s)},
				Items: []corev1.KeyToPath{
					{Key: SSHHostKey, Path: SSHHostKey}, {Key: SSHHostPubKey, Path: SSHHostPubKey}, {Key: SSHKnownHosts, Path: SSHKnownHosts},
				},
			}},
			{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "my-ssh"},
				Items:                []corev1.KeyToPath{{Key: "ssh-privatekey", Path: "ssh-privatekey"}, {Key: "authorized_keys", Path: "authorized_keys"}},
			}},
		},
	}}
	if got == nil {
		t.Fatalf("no %s volume in %v", sshVolumeName, tmpl.Spec.Volumes)
	}
	if diff := cmp.Diff(want, got.VolumeSource); diff != "" {
		t.Errorf("SSH volume (-want +got):\n%s", diff)
	}
	if id := ssh.IdentityFile(); id != "/etc/troupe/ssh/ssh-privatekey" {
		t.Errorf("IdentityFile = %s", id)
	}
	files := ssh.ConfigFiles(s)
	if !strings.Contains(files[SSHClientConfigKey], "IdentityFile /etc/troupe/ssh/ssh-privatekey\n") {
		t.Errorf("ssh_config does not use the user's key:\n%s", files[SSHClientConfigKey])
	}
	// Without a Secret of the user's, the generated key, as before.
	if !strings.Contains(SSH{}.ConfigFiles(s)[SSHClientConfigKey], "IdentityFile /etc/troupe/ssh/id_ed25519\n") {
		t.Error("the generated key is no longer the default identity")
	}
}
