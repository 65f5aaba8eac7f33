package main

import "time"

// lagParts splits the status lag (launcher pod seen finished -> job seen final) of the jobs
// whose final status write the proxy timed into its three parts, each a p50/p99 over those
// jobs:
//   - toWrite: from the launcher pod seen finished to the operator sending the write that made
//     the job final: the launcher's update reaching the operator's watch, the job's wait in the
//     work queue, and the pass up to its write;
//   - write: that write's round trip through the API server;
//   - seen: from the server's answer to the bench's watch seeing the job final.
//
// The bench, the proxy and the tracker share one clock, so the parts add up to the lag.
type lagParts struct {
	jobs                   int // jobs whose final status write was found
	toWriteP50, toWriteP99 time.Duration
	writeP50, writeP99     time.Duration
	seenP50, seenP99       time.Duration
}

// statusLagParts finds, for every job with both times, the last successful status write of it
// that had returned by the time the bench saw it final, and splits its lag there. A job whose
// final status no timed write carries (the limit's side, an operator that writes none) is left
// out.
func statusLagParts(launcherDone, jobFinal map[string]time.Time, writes []statusWrite) lagParts {
	last := map[string][]statusWrite{}
	for _, w := range writes {
		if w.code >= 200 && w.code < 300 {
			last[w.name] = append(last[w.name], w)
		}
	}
	var toWrite, write, seen []time.Duration
	for job, final := range jobFinal {
		done, ok := launcherDone[job]
		if !ok {
			continue
		}
		var found *statusWrite
		for i, w := range last[job] {
			if !w.done.After(final) && (found == nil || w.done.After(found.done)) {
				found = &last[job][i]
			}
		}
		if found == nil {
			continue
		}
		toWrite = append(toWrite, found.sent.Sub(done))
		write = append(write, found.done.Sub(found.sent))
		seen = append(seen, final.Sub(found.done))
	}
	p := lagParts{jobs: len(toWrite)}
	p.toWriteP50, p.toWriteP99 = percentiles(toWrite)
	p.writeP50, p.writeP99 = percentiles(write)
	p.seenP50, p.seenP99 = percentiles(seen)
	return p
}
