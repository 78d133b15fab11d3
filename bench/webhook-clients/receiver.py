# The webhook receiver for webhook-client-bench: answers every POST 200 at once
# (HTTP/1.1 keep-alive, Nagle off, so that neither client waits on delayed ACKs).
#   python3 receiver.py PORT
import http.server, sys
class Hook(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Hook).serve_forever()
