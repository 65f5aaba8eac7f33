package tamper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// What the API server answered a create of a bad spec with, while the webhooks are down.
const (
	// AnswerCRDRule: refused by the CRD's own schema or CEL rule, with the corpus's expected
	// text (field path and reason).
	AnswerCRDRule = "refused by the CRD rule"
	// AnswerWebhookUnreachable: refused because a webhook with failurePolicy Fail could not
	// be called. Not a validation: a good spec is refused the same way.
	AnswerWebhookUnreachable = "refused: webhook unreachable"
	// AnswerAdmitted: stored.
	AnswerAdmitted = "admitted"
	// AnswerOther: refused with another message.
	AnswerOther = "refused otherwise"
	// answerWebhook: a webhook answered, so it is not down.
	answerWebhook = "refused by a webhook"
)

// WebhookDownReport is what CheckWebhookDown saw.
type WebhookDownReport struct {
	// FailurePolicies are troupe's admission webhooks as installed, "<name>: <policy>".
	FailurePolicies []string
	// Total is the number of specs of the corpus; CRDCases of them are marked refused-by: crd
	// (the CEL- and OpenAPI-expressible part).
	Total, CRDCases int
	// AsInstalled counts the answers to every spec of the corpus with the webhooks'
	// failurePolicy as installed.
	AsInstalled map[string]int
	// FailingOpen counts the answers to every spec with troupe's webhooks set to
	// failurePolicy Ignore (the chart's webhook.failurePolicy=Ignore, or webhooks not
	// installed): only the CRDs' rules stand between a bad spec and the cluster. CRD cases and
	// webhook cases are counted apart.
	FailingOpenCRD, FailingOpenWebhook map[string]int
	// RefusedByCRD is FailingOpenCRD[AnswerCRDRule]: the CRD specs the API server refused on
	// its own, with the corpus's expected message.
	RefusedByCRD int
	// Unexpected names each spec whose answer was not the expected one: a CRD spec not refused
	// by its rule, or any spec admitted while the policy is Fail.
	Unexpected []string
}

// WebhookDown creates every spec of the bad-spec corpus in badDir (test/testdata/admission/bad)
// while the operator, and so its admission webhooks, is down, and returns how many of the
// CEL-expressible ones (the corpus header "refused-by: crd", as test/integration/cel_test.go
// reads it) the API server refused by the CRD's own rule, out of how many. See
// CheckWebhookDown for what it does and the rest of what it sees.
func WebhookDown(ctx context.Context, c client.Client, badDir string) (refused, total int, err error) {
	r, err := CheckWebhookDown(ctx, c, badDir)
	if err != nil {
		return 0, 0, err
	}
	return r.RefusedByCRD, r.CRDCases, nil
}

// CheckWebhookDown creates the corpus twice, in a namespace of its own (deleted at the end):
//  1. with troupe's webhooks as installed. With failurePolicy Fail (the default) every create
//     fails with the webhook-unreachable error before the CRD's schema is checked (the API
//     server runs mutating admission first), good spec or bad: nothing gets in, but no CRD
//     rule speaks either;
//  2. with every troupe webhook set to failurePolicy Ignore, then put back as it was (also on
//     error): the CRD's rules alone must refuse each "crd" spec with its expected message;
//     the "webhook" specs are admitted, as the corpus says, and deleted.
//
// It fails if a webhook answers (the operator is not down). It changes the cluster's webhook
// configurations for the length of step 2: run it only on a cluster of your own, with the
// operator stopped.
func CheckWebhookDown(ctx context.Context, c client.Client, badDir string) (_ *WebhookDownReport, err error) {
	cases, err := testutil.LoadAdmissionCases(badDir)
	if err != nil {
		return nil, err
	}
	hooks, err := troupeWebhooks(ctx, c)
	if err != nil {
		return nil, err
	}
	r := &WebhookDownReport{Total: len(cases), AsInstalled: map[string]int{},
		FailingOpenCRD: map[string]int{}, FailingOpenWebhook: map[string]int{}}
	for _, h := range hooks {
		r.FailurePolicies = append(r.FailurePolicies, h.name+": "+string(h.policy))
	}
	for _, cs := range cases {
		if cs.RefusedBy == testutil.LayerCRD {
			r.CRDCases++
		}
	}

	if r.CRDCases == 0 {
		return nil, fmt.Errorf("%s: no spec marked refused-by: crd", badDir)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tamper-webhook-down-"}}
	if err := c.Create(ctx, ns); err != nil {
		return nil, fmt.Errorf("create a namespace: %w", err)
	}
	defer func() {
		if derr := c.Delete(context.WithoutCancel(ctx), ns); derr != nil && err == nil {
			err = fmt.Errorf("delete namespace %s: %w", ns.Name, derr)
		}
	}()

	for _, cs := range cases {
		a, err := createCase(ctx, c, cs, ns.Name)
		if err != nil {
			return nil, err
		}
		r.AsInstalled[a]++
		if a == answerWebhook {
			return nil, fmt.Errorf("%s: a webhook answered: is the operator down?", cs.Name)
		}
		if a == AnswerAdmitted && slices.ContainsFunc(hooks, func(h webhookRef) bool { return h.policy == admissionregistrationv1.Fail }) {
			r.Unexpected = append(r.Unexpected, cs.Name+": admitted with failurePolicy Fail")
		}
	}

	restore, err := failOpen(ctx, c, hooks)
	defer func() {
		if rerr := restore(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err != nil {
		return nil, err
	}
	// The API server learns of the new policy through its own watch: wait until a create is no
	// longer refused as unreachable.
	probe := cases[slices.IndexFunc(cases, func(cs testutil.AdmissionCase) bool { return cs.RefusedBy == testutil.LayerCRD })]
	if err := WaitFor(ctx, policySettle, "the API server applying failurePolicy Ignore", func(ctx context.Context) (bool, error) {
		a, err := createCase(ctx, c, probe, ns.Name)
		return a != AnswerWebhookUnreachable, err
	}); err != nil {
		return nil, err
	}
	for _, cs := range cases {
		a, err := createCase(ctx, c, cs, ns.Name)
		if err != nil {
			return nil, err
		}
		if cs.RefusedBy == testutil.LayerCRD {
			r.FailingOpenCRD[a]++
			if a != AnswerCRDRule {
				r.Unexpected = append(r.Unexpected, cs.Name+": "+a+" (the corpus says the CRD refuses it)")
			}
		} else {
			r.FailingOpenWebhook[a]++
			if a == answerWebhook {
				return nil, fmt.Errorf("%s: a webhook answered: is the operator down?", cs.Name)
			}
		}
	}
	r.RefusedByCRD = r.FailingOpenCRD[AnswerCRDRule]
	return r, nil
}

// policySettle bounds the wait for the API server to apply a webhook configuration change.
const policySettle = 30 * time.Second

// createCase creates one spec of the corpus in ns and classifies the answer; an admitted spec
// is deleted again.
func createCase(ctx context.Context, c client.Client, cs testutil.AdmissionCase, ns string) (string, error) {
	obj := cs.Object.DeepCopy()
	obj.SetNamespace(ns)
	if !strings.Contains(cs.Name, "name") {
		// As test/integration/cel_test.go: a name of its own, so that one spec's leftovers
		// cannot fail another's create for the wrong reason; a case about the name keeps it.
		obj.SetName(obj.GetName() + "-" + cs.Name)
	}
	err := c.Create(ctx, obj)
	if err == nil {
		if derr := c.Delete(ctx, obj); client.IgnoreNotFound(derr) != nil {
			return "", fmt.Errorf("%s: delete the admitted spec: %w", cs.Name, derr)
		}
		return AnswerAdmitted, nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "", err
	}
	return classify(err.Error(), cs.Expect), nil
}

// classify tells the API server's refusals apart by their message.
func classify(msg, expect string) string {
	switch {
	case strings.Contains(msg, "failed calling webhook"):
		return AnswerWebhookUnreachable
	case strings.Contains(msg, "admission webhook") && strings.Contains(msg, "denied the request"):
		return answerWebhook
	case strings.Contains(msg, expect):
		return AnswerCRDRule
	}
	return AnswerOther
}

// webhookRef is one admission webhook of troupe's, in a mutating or validating configuration.
type webhookRef struct {
	config    client.Object
	index     int
	name      string
	policy    admissionregistrationv1.FailurePolicyType
	configKey string
}

// troupeWebhooks finds every admission webhook whose rules name troupe's API group, whatever
// the configurations are called (config/webhook, the Helm chart, a local operator's).
func troupeWebhooks(ctx context.Context, c client.Client) ([]webhookRef, error) {
	var out []webhookRef
	matches := func(rules []admissionregistrationv1.RuleWithOperations) bool {
		return slices.ContainsFunc(rules, func(r admissionregistrationv1.RuleWithOperations) bool {
			return slices.Contains(r.APIGroups, troupev1.GroupVersion.Group)
		})
	}
	policy := func(p *admissionregistrationv1.FailurePolicyType) admissionregistrationv1.FailurePolicyType {
		if p == nil {
			return admissionregistrationv1.Fail // the API's default
		}
		return *p
	}
	var muts admissionregistrationv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &muts); err != nil {
		return nil, fmt.Errorf("list mutating webhook configurations: %w", err)
	}
	for i := range muts.Items {
		cfg := &muts.Items[i]
		for j, w := range cfg.Webhooks {
			if matches(w.Rules) {
				out = append(out, webhookRef{config: cfg, index: j, name: cfg.Name + "/" + w.Name, policy: policy(w.FailurePolicy), configKey: cfg.Name})
			}
		}
	}
	var vals admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vals); err != nil {
		return nil, fmt.Errorf("list validating webhook configurations: %w", err)
	}
	for i := range vals.Items {
		cfg := &vals.Items[i]
		for j, w := range cfg.Webhooks {
			if matches(w.Rules) {
				out = append(out, webhookRef{config: cfg, index: j, name: cfg.Name + "/" + w.Name, policy: policy(w.FailurePolicy), configKey: cfg.Name})
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no admission webhook for troupe.dev is installed")
	}
	return out, nil
}

// failOpen sets every webhook of hooks to failurePolicy Ignore, each by a JSON patch that tests
// the webhook's name at its index first, and returns what puts them back as they were.
func failOpen(ctx context.Context, c client.Client, hooks []webhookRef) (func(context.Context) error, error) {
	const policy = admissionregistrationv1.Ignore
	var done []webhookRef
	set := func(ctx context.Context, h webhookRef, p admissionregistrationv1.FailurePolicyType) error {
		path := fmt.Sprintf("/webhooks/%d", h.index)
		data, err := json.Marshal([]map[string]any{
			{"op": "test", "path": path + "/name", "value": h.name[len(h.configKey)+1:]},
			{"op": "replace", "path": path + "/failurePolicy", "value": p},
		})
		if err != nil {
			return err
		}
		obj := h.config.DeepCopyObject().(client.Object)
		if err := c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, data)); err != nil {
			return fmt.Errorf("set failurePolicy %s on %s: %w", p, h.name, err)
		}
		return nil
	}
	restore := func(ctx context.Context) error {
		var errs []error
		for _, h := range done {
			errs = append(errs, set(ctx, h, h.policy))
		}
		return errors.Join(errs...)
	}
	for _, h := range hooks {
		if h.policy == policy {
			continue
		}
		if err := set(ctx, h, policy); err != nil {
			return restore, err
		}
		done = append(done, h)
	}
	return restore, nil
}
