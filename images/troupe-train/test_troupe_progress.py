"""Tests of troupe_progress against a local endpoint: python3 -m unittest images/troupe-train/test_troupe_progress.py"""

import http.server
import json
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import troupe_progress  # noqa: E402


class Endpoint(http.server.BaseHTTPRequestHandler):
    got = []
    answer = 202

    def do_POST(self):
        n = int(self.headers["Content-Length"])
        Endpoint.got.append((self.headers["Authorization"], json.loads(self.rfile.read(n))))
        self.send_response(Endpoint.answer)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


class ReporterTest(unittest.TestCase):
    def setUp(self):
        self.server = http.server.HTTPServer(("127.0.0.1", 0), Endpoint)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        token = tempfile.NamedTemporaryFile("w", delete=False)
        token.write("a.b.c\n")
        token.close()
        self.addCleanup(os.unlink, token.name)
        self.addCleanup(self.server.shutdown)
        Endpoint.got, Endpoint.answer = [], 202
        os.environ.update(TROUPE_PROGRESS_URL=f"http://127.0.0.1:{self.server.server_port}/p",
                          TROUPE_PROGRESS_TOKEN_FILE=token.name, TROUPE_PROGRESS_CA="")

    def test_reports_paced_and_final(self):
        r = troupe_progress.Reporter(total=100, interval=60)
        self.assertTrue(r.report(1, metrics={"loss": 2}))
        self.assertFalse(r.report(2))  # within the interval: not sent
        self.assertTrue(r.report(100, metrics={"accuracy": 0.9}, message="done", final=True))
        self.assertEqual(Endpoint.got, [
            ("Bearer a.b.c", {"current": 1, "total": 100, "unit": "steps", "metrics": {"loss": 2.0}}),
            ("Bearer a.b.c", {"current": 100, "total": 100, "unit": "steps", "metrics": {"accuracy": 0.9}, "message": "done"}),
        ])

    def test_refused_reports_do_not_raise(self):
        Endpoint.answer = 403
        self.assertFalse(troupe_progress.Reporter(total=10).report(1))

    def test_outside_a_job_nothing_is_sent(self):
        del os.environ["TROUPE_PROGRESS_URL"]
        self.assertFalse(troupe_progress.Reporter().report(5))
        self.assertEqual(Endpoint.got, [])


if __name__ == "__main__":
    unittest.main()
