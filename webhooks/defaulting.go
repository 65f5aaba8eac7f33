package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// DefaultingHandler serves a kind's defaulting webhook and answers with the defaults alone.
//
// controller-runtime's own defaulting handler answers with the difference between the request
// and the defaulted job as Go encodes it. Go's encoding adds fields the user never wrote (an
// empty `resources: {}` in every container, `metadata: {}` in every template), so those were
// stored too, but only when a default was missing, which is at create: an update finds every
// default in place and gets no patch. The next `kubectl apply` of the same manifest replaces
// the containers list as the user wrote it, without them, and the stored job then differed from
// the updated one in fields nobody touched (docs/admission.md, "Updates").
//
// Here the defaults are the merge patch from the decoded job to the defaulted one, both as Go
// encodes them, so that what encoding adds cancels out; it is laid over the request's own JSON.
// A default inside a list replaces that list as Go encodes it, every time it is defaulted, so a
// job defaulted twice is still stored the same (TestDefaultingIsIdempotent).
func DefaultingHandler[T runtime.Object](scheme *runtime.Scheme, newObject func() T, d admission.Defaulter[T]) admission.Handler {
	return &defaulting[T]{decoder: admission.NewDecoder(scheme), newObject: newObject, defaulter: d}
}

type defaulting[T runtime.Object] struct {
	decoder   admission.Decoder
	newObject func() T
	defaulter admission.Defaulter[T]
}

func (h *defaulting[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Delete {
		return admission.Allowed("")
	}
	ctx = admission.NewContextWithRequest(ctx, req)
	job := h.newObject()
	if err := h.decoder.Decode(req, job); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	defaulted, err := DefaultedJSON(ctx, req.Object.Raw, job, h.defaulter.Default)
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: ptr.To(status.Status())}}
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if bytes.Equal(defaulted, req.Object.Raw) {
		return admission.Allowed("")
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, defaulted)
}

// DefaultedJSON returns raw, a job's JSON as sent, with the defaults that def writes into job
// (raw decoded) laid over it, and nothing else of Go's encoding of job.
func DefaultedJSON[T runtime.Object](ctx context.Context, raw []byte, job T, def func(context.Context, T) error) ([]byte, error) {
	before, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	if err := def(ctx, job); err != nil {
		return nil, err
	}
	after, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(before, after) {
		return raw, nil
	}
	defaults, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, err
	}
	return jsonpatch.MergePatch(raw, defaults)
}
