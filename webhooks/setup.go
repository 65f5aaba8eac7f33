package webhooks

import (
	ctrl "sigs.k8s.io/controller-runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The webhook configurations deploy/webhook holds; the operator keeps their caBundle current.
// +kubebuilder:webhookconfiguration:mutating=true,name=troupe-mutating-webhook-configuration
// +kubebuilder:webhookconfiguration:mutating=false,name=troupe-validating-webhook-configuration

// Names of the webhook configurations, for the certificate rotator.
const (
	MutatingConfigurationName   = "troupe-mutating-webhook-configuration"
	ValidatingConfigurationName = "troupe-validating-webhook-configuration"
)

// Setup registers every kind's defaulting and validating webhook with the manager's webhook
// server, at the paths deploy/webhook names.
func Setup(mgr ctrl.Manager, o Options) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &troupev1.ChainerJob{}).
		WithDefaulter(ChainerJob{o}).WithValidator(ChainerJob{o}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &troupev1.MPIJob{}).
		WithDefaulter(MPIJob{o}).WithValidator(MPIJob{o}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &troupev1.HorovodJob{}).
		WithDefaulter(HorovodJob{o}).WithValidator(HorovodJob{o}).Complete()
}
