package engine

// Plan is what one pass decided from a job's spec, its previous status and what it observed:
// the parts of the job's desired state that its spec does not say. The pass builds it in two
// steps, before the observation (pause) and after it (restart, the master held back, the ready
// workers, the end), each time into a copy of the Spec the adapter described (withPlan), so
// that Spec is never changed and each builder reads one decision, made once.
type Plan struct {
	// Pause is in force: asked (RunMode.Pause) and the job has not finished (planPause). The
	// job's master Job and pods are deleted and its worker sets scaled to zero.
	Pause bool
	// WasPaused says the job's status records a pause (its Paused condition), so its replicas
	// run the Resume overrides from then on.
	WasPaused bool
	// HoldMaster: the master Job is to be created again, but pods of the previous one are still
	// terminating (planMasterPods); it is created once they are gone, so that two master pods
	// never share the master's host name.
	HoldMaster bool
	// Restart is where the job is in a whole-job restart (planRestart), and RestartSeen what
	// was seen of the current attempt's failure.
	Restart     RestartState
	RestartSeen RestartObservation
	// ReadyWorkers are the pod hostnames of each worker set (by set name, in ordinal order)
	// whose pods are Ready now, for backends that publish the live membership (elastic
	// discovery).
	ReadyWorkers map[string][]string
	// Ended says the job has succeeded or failed: whatever happens to its workers then,
	// nothing is left to protect from a drain (the disruption budget).
	Ended bool
}

// withPlan is a copy of s that carries p.
func (s *Spec) withPlan(p Plan) *Spec {
	c := *s
	c.Plan = p
	return &c
}
