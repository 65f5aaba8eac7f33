package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/version"
)

// newRootCommand is `kubectl troupe` with every subcommand and kubectl's standard flags
// (--kubeconfig, --context, -n, --as, ...), writing to streams.
func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{streams: streams, flags: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-troupe",
		Short: "Inspect and steer troupe training jobs (" + strings.Join(registeredKindNames(), ", ") + ")",
		Long: "kubectl troupe shows every troupe job kind at once: their state, children, events and logs,\n" +
			"the MPI hostfile the operator generated, and suspends or resumes a job.",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl troupe"},
		// Errors are printed once by main, as kubectl does ("error: ..."), without the usage.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newGetCommand(o), newDescribeCommand(o), newLogsCommand(o), newHostfileCommand(o),
		newSuspendCommand(o, true), newSuspendCommand(o, false), newVersionCommand(o))
	return root
}

// registeredKindNames are the registered kinds' names, in the registry's order.
func registeredKindNames() []string {
	var names []string
	for _, k := range kinds.All() {
		names = append(names, k.Name)
	}
	return names
}

// options are what every subcommand shares: the output streams and kubectl's flags.
type options struct {
	streams genericiooptions.IOStreams
	flags   *genericclioptions.ConfigFlags
}

// session is a connection to the cluster the flags name.
type session struct {
	client client.Client
	core   kubernetes.Interface
	// namespace is -n, else the kubeconfig context's, else "default".
	namespace string
	kinds     []jobKind
	flags     *genericclioptions.ConfigFlags
}

func (o *options) session() (*session, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mapper, err := o.flags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	kinds, err := registeredKinds(scheme)
	if err != nil {
		return nil, err
	}
	return &session{client: c, core: core, namespace: ns, kinds: kinds, flags: o.flags}, nil
}

func newVersionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and git revision",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(o.streams.Out, version.String("kubectl-troupe"))
			return err
		},
	}
}
