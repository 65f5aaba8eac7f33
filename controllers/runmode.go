package controllers

import (
	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// debugSleep is what a debug replica runs by default when it need not serve anything: it never
// ends, and keeps the container up for `kubectl exec`.
var debugSleep = []string{"sleep", "inf"}

// runModeOf maps a kind's runMode onto the engine's; master is the master's replica type
// ("launcher" or "master"). In debug mode the master sleeps and the workers run what lets the
// master (and the user) reach them: with SSH the transport's sshd, as in normal runs; with
// KubeExec nothing is needed but a running container, so they sleep too.
func runModeOf(rm *troupev1.RunMode, master troupev1.ReplicaType, transport troupev1.MPITransport) engine.RunMode {
	var out engine.RunMode
	if master != troupev1.ReplicaMaster {
		out.MasterType = master // the engine's default is "master"
	}
	if rm == nil {
		return out
	}
	if d := rm.Debug; d != nil && d.Enabled {
		workerDefault := debugSleep
		if transport != troupev1.MPITransportKubeExec {
			workerDefault = nil // the transport's sshd
		}
		out.Debug = &engine.ReplicaOverrides{
			Master: debugOverride(d.ReplicaSpecs, master, debugSleep),
			Worker: debugOverride(d.ReplicaSpecs, troupev1.ReplicaWorker, workerDefault),
		}
	}
	if p := rm.Pause; p != nil {
		out.Pause = p.Enabled
		if len(p.ResumeSpecs) > 0 {
			out.Resume = &engine.ReplicaOverrides{
				Master: resumeOverride(p.ResumeSpecs, master),
				Worker: resumeOverride(p.ResumeSpecs, troupev1.ReplicaWorker),
			}
		}
	}
	return out
}

// debugOverride is one replica type's debug override: its entry's command (the container's
// args are dropped with it), else def; nil def keeps what the replica runs.
func debugOverride(specs []troupev1.DebugReplicaSpec, t troupev1.ReplicaType, def []string) engine.ReplicaOverride {
	o := engine.ReplicaOverride{Command: def}
	for _, r := range specs {
		if r.Type != t {
			continue
		}
		o.SkipInitContainers = r.SkipInitContainer
		if len(r.Command) > 0 {
			o.Command = r.Command
		}
	}
	if o.Command != nil {
		o.Args = []string{}
	}
	return o
}

// resumeOverride is one replica type's resume override: what its entry gives replaces the
// template's; what it leaves out is kept.
func resumeOverride(specs []troupev1.ResumeSpec, t troupev1.ReplicaType) engine.ReplicaOverride {
	for _, r := range specs {
		if r.Type == t {
			return engine.ReplicaOverride{SkipInitContainers: r.SkipInitContainer, Command: nonEmpty(r.Command), Args: nonEmpty(r.Args)}
		}
	}
	return engine.ReplicaOverride{}
}

func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
