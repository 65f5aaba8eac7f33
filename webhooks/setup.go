package webhooks

// The webhook configurations config/webhook holds; the operator keeps their caBundle current.
// +kubebuilder:webhookconfiguration:mutating=true,name=troupe-mutating-webhook-configuration
// +kubebuilder:webhookconfiguration:mutating=false,name=troupe-validating-webhook-configuration

// Names of the webhook configurations, for the certificate rotator.
const (
	MutatingConfigurationName   = "troupe-mutating-webhook-configuration"
	ValidatingConfigurationName = "troupe-validating-webhook-configuration"
)
