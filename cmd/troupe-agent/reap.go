package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
)

// launchMarker is set in the environment of every command troupe-rsh starts in a worker pod,
// and so inherited by everything that command starts (Open MPI's orted and its ranks, Hydra's
// proxy and its ranks, whatever a rank forks). Its value is the launcher pod's host name.
//
// A process started through pods/exec belongs to the worker's container, not to the exec
// stream: when a launcher dies without tearing its job down (the pod deleted or evicted, the
// node lost, mpirun killed), the stream drops and its daemons and ranks go on running in the
// workers, still holding their cores, memory and GPUs, and sometimes still writing to shared
// files. The launcher Job's next attempt would then run beside them. So the wait step of every
// launcher attempt first kills, in each worker, every process that carries this variable: at
// that point no process of the current attempt exists yet, so all of them are an earlier
// attempt's.
const launchMarker = "TROUPE_RSH_LAUNCHER"

// markedCommand is the shell command troupe-rsh runs in the pod: command with launchMarker
// exported first.
func markedCommand(launcher, command string) string {
	return "export " + launchMarker + "=" + shellQuote(launcher) + "; " + command
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// reapScript kills (SIGKILL: leftovers get no say) every process of the container whose
// environment holds launchMarker, and prints how many it killed. It needs only a POSIX shell,
// tr and kill, and reads /proc as the container's user: it reaches the processes that user
// started, which are the ones troupe-rsh started. The shell running it does not carry the
// marker (it is not started through troupe-rsh).
var reapScript = `n=0
for d in /proc/[0-9]*; do
  case "$(tr '\0' '\n' 2>/dev/null <"$d/environ")" in
  *` + launchMarker + `=*) kill -KILL "${d#/proc/}" 2>/dev/null && n=$((n + 1)) ;;
  esac
done
echo "$n"`

// reapHosts kills, in each host's pod, what an earlier launcher attempt left running there
// (see launchMarker), and reports each host where it killed anything to log. A host it cannot
// reach is reported, not fatal: the hosts were reachable a moment ago, and the launcher's own
// start will say more.
func reapHosts(ctx context.Context, hosts []string, log io.Writer) {
	for _, h := range hosts {
		var out, errOut bytes.Buffer
		code, err := execInPod(ctx, h, []string{"/bin/sh", "-c", reapScript}, nil, &out, &errOut)
		switch {
		case err != nil || code != 0:
			_, _ = fmt.Fprintf(log, "troupe-agent wait: %s: could not look for an earlier attempt's processes (exit %d, %v): %s\n",
				h, code, err, strings.TrimSpace(errOut.String()))
		case strings.TrimSpace(out.String()) != "0":
			_, _ = fmt.Fprintf(log, "troupe-agent wait: %s: killed %s processes left by an earlier launcher\n", h, strings.TrimSpace(out.String()))
		}
	}
}
