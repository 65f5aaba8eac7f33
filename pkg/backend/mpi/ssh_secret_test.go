package mpi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// With a Secret of the user's (ssh.secretName), a worker finds the user's authorized_keys
// beside the job's generated host key, the launcher the user's key beside the generated
// known_hosts, in one directory, and the launcher's ssh uses the user's key.
func TestSSHWithTheUsersSecret(t *testing.T) {
	s := chainerSpec()
	ssh := SSH{SecretName: "my-key"}
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
				Items:                []corev1.KeyToPath{{Key: SSHHostKey, Path: SSHHostKey}},
			}},
			{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "my-key"},
				Items:                []corev1.KeyToPath{{Key: "authorized_keys", Path: "authorized_keys"}},
			}},
		},
	}}
	if got == nil {
		t.Fatalf("no %s volume in %v", sshVolumeName, tmpl.Spec.Volumes)
	}
	if diff := cmp.Diff(want, got.VolumeSource); diff != "" {
		t.Errorf("SSH volume (-want +got):\n%s", diff)
	}
	launcher := template("chainer")
	b.DecoratePod(s, nil, &launcher)
	for _, v := range launcher.Spec.Volumes {
		if v.Name == sshVolumeName {
			srcs := v.Projected.Sources
			if !cmp.Equal(srcs[0].Secret.Items, []corev1.KeyToPath{{Key: SSHKnownHosts, Path: SSHKnownHosts}}) ||
				!cmp.Equal(srcs[1].Secret.Items, []corev1.KeyToPath{{Key: "ssh-privatekey", Path: "ssh-privatekey"}}) {
				t.Errorf("launcher SSH volume = %+v, want known_hosts and the user's private key", srcs)
			}
		}
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
