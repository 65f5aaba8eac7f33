package kinds

import (
	"path/filepath"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// A failure policy rule on the launcher's or master's exit code acts on its first exit in
// every form a user brings: the master Job carries the rule as a pod failure policy, which
// needs pods that are not restarted in place, so a master whose template says restartPolicy
// OnFailure (kubeflow's default for a launcher, training-operator's for a master) runs with
// Never. Every manifest users bring, by glob (examples, kubeflow's, training-operator's, the
// seeds'), each with the rule added as a user would write it.
func TestMasterExitCodeRuleActsInEveryForm(t *testing.T) {
	served := map[string]Kind{}
	for _, k := range All() {
		served[k.Name] = k
	}
	manifests, err := testutil.UserManifests(filepath.Join(".."), func(kind string) bool { return served[kind].Name != "" })
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	onFailure := 0
	for _, m := range manifests {
		t.Run(m.Name, func(t *testing.T) {
			k := served[m.Object["kind"].(string)]
			spec, _ := m.Object["spec"].(map[string]any)
			runPolicy, _ := spec["runPolicy"].(map[string]any)
			if runPolicy == nil {
				runPolicy = map[string]any{}
				spec["runPolicy"] = runPolicy
			}
			runPolicy["failurePolicy"] = map[string]any{"maxRestarts": 0, "rules": []any{
				map[string]any{"name": "bug", "action": "FailJob", "onExitCodes": map[string]any{"values": []any{42}}},
			}}
			job := decode(t, k, m.Object)
			if errs := k.Admit(job, defaultsWebhookOptions); len(errs) > 0 {
				t.Fatalf("refused with the rule: %v", errs.ToAggregate())
			}
			s := describeSpec(k, job)
			if err := k.Adapter(fuzzAdapterOptions).Describe(job, s); err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if !s.HasMaster() || s.RunMode.Debug != nil {
				t.Skip("no master, or debug mode (which never restarts)")
			}
			if s.Master.Template.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
				onFailure++
			}
			master := engine.BuildMasterJob(s)
			if got := master.Spec.Template.Spec.RestartPolicy; got != corev1.RestartPolicyNever {
				t.Errorf("the master's pods restart %s, want Never: a pod failure policy needs it", got)
			}
			pfp := master.Spec.PodFailurePolicy
			if pfp == nil || !slices.ContainsFunc(pfp.Rules, func(r batchv1.PodFailurePolicyRule) bool {
				return r.Action == batchv1.PodFailurePolicyActionFailJob && r.OnExitCodes != nil && slices.Contains(r.OnExitCodes.Values, 42)
			}) {
				t.Errorf("the master Job has no FailJob rule on exit code 42: %+v", pfp)
			}
		})
	}
	// The forms whose master restarts in place are among them, or the test proves nothing.
	if onFailure == 0 {
		t.Error("no manifest's master restarts OnFailure: the case the rule's override is for is not tested")
	}
}
