package main

import (
	"cmp"
	"slices"
	"time"
)

// lagParts splits the status lag (launcher pod seen finished -> job seen final) of the jobs
// whose final status write the proxy timed into its three parts, each a p50/p99 over those
// jobs:
//   - toWrite: from the launcher pod seen finished to the operator sending the write that made
//     the job final: the launcher's update reaching the operator's watch, the job's wait in the
//     work queue, and the pass up to its write;
//   - write: that write's round trip through the API server;
//   - seen: from the server's answer to the bench's watch seeing the job final; negative when
//     the bench's watch had the change before the operator had the server's answer.
//
// The bench, the proxy and the tracker share one clock, so the parts add up to the lag.
type lagParts struct {
	jobs                   int // jobs whose final status write was found
	toWriteP50, toWriteP99 time.Duration
	writeP50, writeP99     time.Duration
	seenP50, seenP99       time.Duration
	rows                   []lagRow // per job, for lag.csv
}

// lagRow is one job's times, as offsets from the run's start.
type lagRow struct {
	job                                       string
	launcherDone, writeSent, writeDone, final time.Duration
}

// statusLagParts finds, for every job with both times, the last successful status write of it
// sent before the bench saw it final (a job's writes go one at a time, so that is the one that
// made it final: its answer may come back after the bench's watch saw the change), and splits
// its lag there. A job whose final status no timed write carries (the limit's side, an
// operator that writes none) is left out. start is the run's start, for the rows.
func statusLagParts(start time.Time, launcherDone, jobFinal map[string]time.Time, writes []statusWrite) lagParts {
	succeeded := map[string][]statusWrite{} // by job
	for _, w := range writes {
		if w.code >= 200 && w.code < 300 {
			succeeded[w.name] = append(succeeded[w.name], w)
		}
	}
	var toWrite, write, seen []time.Duration
	var rows []lagRow
	for job, final := range jobFinal {
		done, ok := launcherDone[job]
		if !ok {
			continue
		}
		var found *statusWrite
		for i, w := range succeeded[job] {
			if !w.sent.After(final) && (found == nil || w.sent.After(found.sent)) {
				found = &succeeded[job][i]
			}
		}
		if found == nil {
			continue
		}
		toWrite = append(toWrite, found.sent.Sub(done))
		write = append(write, found.done.Sub(found.sent))
		seen = append(seen, final.Sub(found.done))
		rows = append(rows, lagRow{job: job, launcherDone: done.Sub(start), writeSent: found.sent.Sub(start),
			writeDone: found.done.Sub(start), final: final.Sub(start)})
	}
	slices.SortFunc(rows, func(a, b lagRow) int { return cmp.Compare(a.final, b.final) })
	p := lagParts{jobs: len(toWrite), rows: rows}
	p.toWriteP50, p.toWriteP99 = percentiles(toWrite)
	p.writeP50, p.writeP99 = percentiles(write)
	p.seenP50, p.seenP99 = percentiles(seen)
	return p
}
