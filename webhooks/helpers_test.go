package webhooks

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// chainerTemplate is a pod template with the chainer container and gpus GPUs (none when 0).
func chainerTemplate(gpus int64) corev1.PodTemplateSpec {
	c := corev1.Container{Name: troupev1.ChainerMainContainer, Image: "chainer:1"}
	if gpus != 0 {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": q}
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}
