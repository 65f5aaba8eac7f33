// Command kubectl-troupe is the kubectl plugin of troupe: `kubectl troupe get|describe|logs|
// hostfile|suspend|resume` over every troupe job kind at once (docs/kubectl-plugin.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	// Ctrl-C ends `logs -f` (and any request in flight) through the context.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		os.Exit(1)
	}
}
