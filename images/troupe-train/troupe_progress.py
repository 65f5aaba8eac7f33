"""Report a training's progress to troupe: the standard library only.

troupe gives every container of a job's pods the URL of the job's progress endpoint
(TROUPE_PROGRESS_URL), the path of the pod's token for it (TROUPE_PROGRESS_TOKEN_FILE, a
ServiceAccount token for the audience progress.troupe.dev that the kubelet renews; it grants no
Kubernetes rights) and the CA of the endpoint's certificate (TROUPE_PROGRESS_CA, PEM). Report
from one process of the job (rank 0):

    import troupe_progress
    reporter = troupe_progress.Reporter(total=steps, unit="steps")
    for step in range(1, steps + 1):
        ...
        reporter.report(step, metrics={"loss": loss})
    reporter.report(steps, metrics={"loss": loss, "accuracy": acc}, final=True)

Reporting never fails the training: outside a troupe job (no TROUPE_PROGRESS_URL) it does
nothing, and an error is printed once and otherwise ignored. The endpoint takes about one report
a second per job; Reporter sends at most one every `interval` seconds (the last one, final=True,
always), so it can be called every step. See docs/progress.md; from a shell:

    curl -sS --cacert <(printf '%s' "$TROUPE_PROGRESS_CA") \\
      -H "Authorization: Bearer $(cat "$TROUPE_PROGRESS_TOKEN_FILE")" \\
      -d '{"current": 120, "total": 1000, "metrics": {"loss": 0.42}}' "$TROUPE_PROGRESS_URL"
"""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

__all__ = ["Reporter", "report", "enabled"]


def enabled():
    """Whether this process runs in a troupe job whose pods can report."""
    return bool(os.environ.get("TROUPE_PROGRESS_URL"))


class Reporter:
    """Sends progress reports, at most one every `interval` seconds (but final ones)."""

    def __init__(self, total=None, unit="steps", interval=2.0, timeout=3.0):
        self.total, self.unit = total, unit
        self.interval, self.timeout = interval, timeout
        self._last = 0.0
        self._warned = False
        self._url = os.environ.get("TROUPE_PROGRESS_URL", "")
        self._token_file = os.environ.get("TROUPE_PROGRESS_TOKEN_FILE", "")
        self._context = None
        ca = os.environ.get("TROUPE_PROGRESS_CA", "")
        if self._url:
            self._context = ssl.create_default_context(cadata=ca) if ca else ssl.create_default_context()

    def report(self, current, total=None, metrics=None, message=None, final=False):
        """Reports `current` of `total` (default the Reporter's) units, with named metrics (a
        dict of numbers) and a message. Returns whether the endpoint took it."""
        if not self._url:
            return False
        now = time.monotonic()
        if not final and now - self._last < self.interval:
            return False
        self._last = now
        body = {"current": int(current)}
        total = self.total if total is None else total
        if total is not None:
            body["total"] = int(total)
        if self.unit:
            body["unit"] = self.unit
        if metrics:
            body["metrics"] = {k: float(v) for k, v in metrics.items()}
        if message:
            body["message"] = str(message)[:256]
        # A busy or not-leading replica answers 429 or 503: the last report is worth a retry.
        for attempt in range(3 if final else 1):
            status = self._send(body)
            if status not in (429, 503):
                return status == 202
            time.sleep(1)
        return False

    def _send(self, body):
        try:
            with open(self._token_file, encoding="ascii") as f:
                token = f.read().strip()
            req = urllib.request.Request(
                self._url, data=json.dumps(body).encode(), method="POST",
                headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._context) as resp:
                return resp.status
        except urllib.error.HTTPError as e:
            if e.code not in (429, 503):
                self._warn(f"HTTP {e.code}: {e.read()[:200].decode(errors='replace')}")
            return e.code
        except (OSError, ValueError) as e:
            self._warn(str(e))
            return 0

    def _warn(self, what):
        if not self._warned:
            self._warned = True
            print(f"troupe_progress: a report was not taken ({what}); training goes on",
                  file=sys.stderr, flush=True)


_default = None


def report(current, total=None, unit="steps", metrics=None, message=None, final=False):
    """Reports through one Reporter of the process (see Reporter.report)."""
    global _default
    if _default is None:
        _default = Reporter(total=total, unit=unit)
    return _default.report(current, total=total, metrics=metrics, message=message, final=final)
