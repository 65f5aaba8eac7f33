package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/backend/torch"
	"github.com/troupe-dev/troupe/pkg/engine"
)

func newHostfileCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "hostfile (NAME | KIND/NAME)",
		Short: "Print the MPI hostfile the operator generated for a job",
		Long: "Print the MPI hostfile the operator generated for a job, as its pods read it from the\n" +
			"job's ConfigMap (key " + mpi.HostfileKey + ", mounted at " + mpi.HostfilePath + ").",
		Example: "  kubectl troupe hostfile mpijob/pi",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, j, err := o.findJob(cmd, args[0])
			if err != nil {
				return err
			}
			cms, err := s.configMaps(cmd.Context(), j)
			if err != nil {
				return err
			}
			if cm := hostfileConfigMap(cms); cm != nil {
				_, err := io.WriteString(o.streams.Out, cm.Data[mpi.HostfileKey])
				return err
			}
			return noHostfile(j)
		},
	}
}

// hostfileConfigMap is the job's ConfigMap that holds a hostfile, if it has one.
func hostfileConfigMap(cms []corev1.ConfigMap) *corev1.ConfigMap {
	for i := range cms {
		if _, ok := cms[i].Data[mpi.HostfileKey]; ok {
			return &cms[i]
		}
	}
	return nil
}

// hostfileOptions are operator settings under which any valid job describes: every gang
// provider available, as only the job's backend matters here.
var hostfileOptions = controllers.Options{
	AvailableGangs: map[troupev1.GangProvider]bool{troupev1.GangVolcano: true, troupev1.GangCoscheduling: true},
}

// noHostfile says why a job has no hostfile ConfigMap, from the backend its kind's adapter
// chooses for it: the operator's own reading of the spec.
func noHostfile(j job) error {
	s, err := engine.Describe(j.kind.Adapter(hostfileOptions), j.kind.GVK, j.obj)
	if err != nil {
		return fmt.Errorf("%s has no hostfile: the operator cannot run its spec: %w", j.ref(), err)
	}
	return fmt.Errorf("%s has no hostfile: %s", j.ref(), whyNoHostfile(s, j.status()))
}

func whyNoHostfile(s *engine.Spec, st *troupev1.JobStatus) string {
	switch s.Backend.(type) {
	case nil:
		return "it has no MPI backend (spec.backend none): its master runs alone"
	case torch.Backend:
		return "it runs PyTorch, whose processes find each other through torch's rendezvous (the master's address), not an MPI hostfile"
	case mpi.Backend:
		phase := strings.ToLower(string(st.Phase))
		if phase == "" {
			phase = "not yet reconciled"
		}
		return fmt.Sprintf("the operator has not written its ConfigMap %s yet (the job is %s)", mpi.ConfigMapName(s), phase)
	}
	return fmt.Sprintf("its backend (%T) writes no hostfile", s.Backend)
}
