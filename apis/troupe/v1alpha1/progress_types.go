package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ProgressStatus is status.progress: the last report of the training's progress, folded by the
// operator (docs/progress.md). The training reports to the operator's progress endpoint; the
// operator writes this, once per pass, as it writes the rest of the status.
type ProgressStatus struct {
	// percent is current over total, 0 to 100 (rounded down; 100 only once current reaches
	// total). Absent when the report gave no total.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent *int32 `json:"percent,omitempty"`

	// current is the last step (or epoch, as unit says) the training reported.
	// +kubebuilder:validation:Minimum=0
	Current int64 `json:"current"`

	// total is the number of steps (or epochs) the training will run, as it reported it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Total int64 `json:"total,omitempty"`

	// unit is what current and total count: steps, epochs, samples... (default steps).
	// +kubebuilder:validation:MaxLength=16
	// +optional
	Unit string `json:"unit,omitempty"`

	// message is the training's own word of where it is ("epoch 3/10, evaluating").
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Message string `json:"message,omitempty"`

	// metrics are the named values of the last report that gave any (loss, accuracy,
	// throughput), each as a decimal string.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Metrics []ProgressMetric `json:"metrics,omitempty"`

	// rate is how many units a second the training advances, from its reports (a moving
	// average), as a decimal string.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Rate string `json:"rate,omitempty"`

	// remaining is the time left at rate when the last report came ("4m10s"): kubectl's ETA
	// column. Absent without a total or a rate.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Remaining string `json:"remaining,omitempty"`

	// estimatedCompletionTime is when the training should reach total at rate.
	// +optional
	EstimatedCompletionTime *metav1.Time `json:"estimatedCompletionTime,omitempty"`

	// lastReportTime is when the operator received the last report folded here.
	// +optional
	LastReportTime *metav1.Time `json:"lastReportTime,omitempty"`

	// lastProgressTime is when current last moved forward (or the first report): what
	// runPolicy.progressDeadlineSeconds counts from.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
}

// ProgressMetric is one named value the training reported.
type ProgressMetric struct {
	// name names the metric: lower-case letters, digits and underscores, as Prometheus labels
	// take them.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]*$`
	// +required
	Name string `json:"name"`
	// value is the metric's value as a decimal string ("0.0421").
	// +kubebuilder:validation:MaxLength=32
	// +required
	Value string `json:"value"`
}

// Bounds of a progress report, so that no report can grow the status or the operator's memory
// (docs/progress.md): the endpoint refuses a larger one.
const (
	// MaxProgressReportBytes bounds a report's body.
	MaxProgressReportBytes = 4096
	// MaxProgressMetrics bounds the metrics of one report (and status.progress.metrics).
	MaxProgressMetrics = 16
	// MaxProgressMetricName bounds a metric's name.
	MaxProgressMetricName = 32
	// MaxProgressMessage bounds a report's message, in bytes.
	MaxProgressMessage = 256
	// MaxProgressUnit bounds a report's unit.
	MaxProgressUnit = 16
)

// ConditionStalled is True while a job that reported its progress has reported none that moves
// it forward within runPolicy.progressDeadlineSeconds. It appears only on jobs with a deadline
// that reported at least once.
const ConditionStalled = "Stalled"

// Reasons of the Stalled condition.
const (
	// ReasonProgressStalled: no report moved the job forward within its
	// progressDeadlineSeconds (ConditionStalled True); the message says when it last moved.
	ReasonProgressStalled = "ProgressStalled"
	// ReasonProgressing: the job's reports move it forward (ConditionStalled False).
	ReasonProgressing = "Progressing"
)

// EventStalled is the Warning event of a job that became Stalled.
const EventStalled = "Stalled"

// ProgressAudience is the audience of the ServiceAccount token troupe projects into a job's pods
// for the progress endpoint: the API server does not take it (it is not one of its audiences),
// so it grants the pod no Kubernetes rights.
const ProgressAudience = "progress.troupe.dev"

// The environment troupe gives every container of a job's pods, for the training to report
// its progress (docs/progress.md).
const (
	// EnvProgressURL is the URL of the job's own progress endpoint.
	EnvProgressURL = "TROUPE_PROGRESS_URL"
	// EnvProgressTokenFile is the path of the pod's token for it.
	EnvProgressTokenFile = "TROUPE_PROGRESS_TOKEN_FILE"
	// EnvProgressCA is the PEM certificate of the CA that signed the endpoint's certificate.
	EnvProgressCA = "TROUPE_PROGRESS_CA"
)
