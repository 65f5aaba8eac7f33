// Command troupe-agent is the in-pod helper of troupe's MPI launchers:
//
//	troupe-agent wait ...      the launcher's init container: install the agent for the
//	                           launcher, then wait (bounded) until every host of the hostfile
//	                           resolves and accepts the job's transport;
//	troupe-agent git-sync ...  a git init container of a job's pods (appCodesToSync): clone
//	                           one branch of a repository into the pod's emptyDir;
//	troupe-agent version       print the version and the git revision;
//	troupe-rsh [opts] host cmd the KubeExec rsh agent MPI launchers call to start a remote
//	                           process: it runs cmd in the host's pod through the API server's
//	                           pods/exec with the job's own ServiceAccount (also "troupe-agent rsh").
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/troupe-dev/troupe/pkg/version"
)

// rshName is the name troupe-agent answers to as an rsh agent; the wait installs it as a link.
const rshName = "troupe-rsh"

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	if filepath.Base(args[0]) == rshName {
		logClientGo(os.Stderr, rshName)
		return rsh(args[1:])
	}
	if len(args) < 2 {
		usage()
		return 2
	}
	if args[1] == "rsh" {
		logClientGo(os.Stderr, rshName)
	} else {
		logClientGo(os.Stderr, "troupe-agent "+args[1])
	}
	switch args[1] {
	case "wait":
		return wait(args[2:])
	case "rsh":
		return rsh(args[2:])
	case "git-sync":
		return gitSync(args[2:])
	case "version", "--version":
		fmt.Println(version.String("troupe-agent"))
		return 0
	default:
		usage()
		return 2
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: troupe-agent wait [flags] | troupe-agent git-sync [flags] | troupe-agent rsh [options] host command... (also as %s) | troupe-agent version\n", rshName)
}
