package webhooks

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// sourcedClaim is a valid claim spec that names where its volume comes from as edit says.
func sourcedClaim(edit func(*corev1.PersistentVolumeClaimSpec)) corev1.PersistentVolumeClaimSpec {
	spec := corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
	if edit != nil {
		edit(&spec)
	}
	return spec
}

func withVolumeName(s *corev1.PersistentVolumeClaimSpec) { s.VolumeName = "pv-of-someone-else" }

func withSnapshot(s *corev1.PersistentVolumeClaimSpec) {
	s.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
}

func withDataSourceRef(s *corev1.PersistentVolumeClaimSpec) {
	s.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "other-claim"}
}

// storageMPIJob is a valid MPIJob with the given claims.
func storageMPIJob(st *troupev1.Storage) *troupev1.MPIJob {
	j := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns"}, Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{
		Worker: troupev1.MPIWorker{Replicas: ptr.To[int32](2), Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:1"}}}}},
		RunPolicy: troupev1.RunPolicy{Storage: st},
	}}}
	j.SetDefaults(Options{}.Defaults())
	return j
}

// A claim of runPolicy.storage that names its volume (volumeName) or its data (dataSource,
// dataSourceRef) is refused at create, each at its own field path with the flag that allows
// it, unless the operator runs with that flag; so is a shared claim.
func TestClaimVolumeSourcesNeedTheFlag(t *testing.T) {
	st := &troupev1.Storage{
		ClaimTemplates: []troupev1.WorkerClaimTemplate{
			{Name: "plain", Spec: sourcedClaim(nil)},
			{Name: "bound", Spec: sourcedClaim(withVolumeName)},
		},
		SharedClaims: []troupev1.SharedClaim{
			{Name: "cloned", Spec: sourcedClaim(withSnapshot)},
			{Name: "populated", Spec: sourcedClaim(withDataSourceRef)},
		},
	}
	_, err := MPIJob{}.ValidateCreate(context.Background(), storageMPIJob(st))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("flag off: %v, want Invalid", err)
	}
	for _, field := range []string{
		"spec.runPolicy.storage.claimTemplates[1].spec.volumeName",
		"spec.runPolicy.storage.sharedClaims[0].spec.dataSource",
		"spec.runPolicy.storage.sharedClaims[1].spec.dataSourceRef",
	} {
		if !strings.Contains(err.Error(), field+": Forbidden: ") {
			t.Errorf("flag off: %v\nwant %s Forbidden", err, field)
		}
	}
	if !strings.Contains(err.Error(), troupev1.AllowClaimVolumeSourcesFlag) {
		t.Errorf("flag off: %v\ndoes not name %s", err, troupev1.AllowClaimVolumeSourcesFlag)
	}
	if strings.Contains(err.Error(), "claimTemplates[0]") {
		t.Errorf("flag off: the plain claim template is refused too: %v", err)
	}
	if _, err := (MPIJob{Options{AllowClaimVolumeSources: true}}).ValidateCreate(context.Background(), storageMPIJob(st)); err != nil {
		t.Errorf("flag on: %v", err)
	}
}

// Every kind refuses such a claim at create, at spec.runPolicy.storage.
func TestClaimVolumeSourcesRefusedForEveryKind(t *testing.T) {
	st := &troupev1.Storage{ClaimTemplates: []troupev1.WorkerClaimTemplate{{Name: "ckpt", Spec: sourcedClaim(withVolumeName)}}}
	const want = "spec.runPolicy.storage.claimTemplates[0].spec.volumeName: Forbidden"

	torch := pytorchJob()
	torch.Spec.RunPolicy.Storage = st
	horovod := &troupev1.HorovodJob{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns"}, Spec: troupev1.HorovodJobSpec{MPIProgramSpec: storageMPIJob(st).Spec.MPIProgramSpec}}
	horovod.Spec.Worker.Template.Spec.Containers[0].Name = troupev1.HorovodMainContainer
	horovod.SetDefaults(Options{}.Defaults())
	chainer := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: troupev1.ChainerJobSpec{
		Master:    troupev1.ChainerMaster{Template: chainerTemplate(0)},
		RunPolicy: troupev1.RunPolicy{Storage: st},
	}}
	chainer.SetDefaults(Options{}.Defaults())
	for kind, create := range map[string]func(Options) error{
		"PyTorchJob": func(o Options) error {
			_, err := (PyTorchJob{o}).ValidateCreate(context.Background(), torch)
			return err
		},
		"HorovodJob": func(o Options) error {
			_, err := (HorovodJob{o}).ValidateCreate(context.Background(), horovod)
			return err
		},
		"ChainerJob": func(o Options) error {
			_, err := (ChainerJob{o}).ValidateCreate(context.Background(), chainer)
			return err
		},
	} {
		if err := create(Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s, flag off: %v, want %s", kind, err, want)
		}
		if err := create(Options{AllowClaimVolumeSources: true}); err != nil {
			t.Errorf("%s, flag on: %v", kind, err)
		}
	}
}

// A job admitted while the operator allowed such claims stays updatable after it stopped
// allowing them: an update that leaves storage alone (a scale, a label) is not refused.
func TestClaimVolumeSourcesNotCheckedOnUpdate(t *testing.T) {
	stored := storageMPIJob(&troupev1.Storage{ClaimTemplates: []troupev1.WorkerClaimTemplate{{Name: "ckpt", Spec: sourcedClaim(withVolumeName)}}})
	for name, edit := range map[string]func(*troupev1.MPIJob){
		"scaled":   func(j *troupev1.MPIJob) { j.Spec.Worker.Replicas = ptr.To[int32](4) },
		"labelled": func(j *troupev1.MPIJob) { j.Labels = map[string]string{"team": "vision"} },
	} {
		updated := stored.DeepCopy()
		edit(updated)
		if _, err := (MPIJob{}).ValidateUpdate(context.Background(), stored, updated); err != nil {
			t.Errorf("%s with the flag off: %v", name, err)
		}
	}
}
