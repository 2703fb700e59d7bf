"""A stand-in for the EC2 instance metadata service, IMDSv2 flavour, on a
free loopback port (tests/harness/servers.h).

Usage: imds_server.py ACCESS_KEY_ID SECRET_ACCESS_KEY ROLE LIFETIME_SECONDS

PUT /latest/api/token (with X-aws-ec2-metadata-token-ttl-seconds) issues a
session token; the GETs below need it in X-aws-ec2-metadata-token (401
otherwise, as IMDSv2 answers):
  /latest/meta-data/iam/security-credentials/        the role name
  /latest/meta-data/iam/security-credentials/ROLE    its credentials, JSON;
      Token is "session-N" for the Nth answer, Expiration LIFETIME from now.
Prints "listening PORT" when ready, then "METHOD PATH STATUS" per request.
"""
import datetime
import http.server
import json
import secrets
import sys

ACCESS_KEY_ID, SECRET, ROLE, LIFETIME = sys.argv[1:5]
ROLES_PATH = "/latest/meta-data/iam/security-credentials/"
tokens = set()
answers = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, status, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        print(f"{self.command} {self.path} {status}", flush=True)

    def log_message(self, *args):
        pass

    def do_PUT(self):
        if (self.path != "/latest/api/token" or
                "X-aws-ec2-metadata-token-ttl-seconds" not in self.headers):
            return self.reply(400, "bad token request")
        token = secrets.token_hex(16)
        tokens.add(token)
        self.reply(200, token)

    def do_GET(self):
        global answers
        if self.headers.get("X-aws-ec2-metadata-token") not in tokens:
            return self.reply(401, "")
        if self.path == ROLES_PATH:
            return self.reply(200, ROLE + "\n")
        if self.path != ROLES_PATH + ROLE:
            return self.reply(404, "")
        answers += 1
        expiration = (datetime.datetime.now(datetime.timezone.utc) +
                      datetime.timedelta(seconds=int(LIFETIME)))
        self.reply(200, json.dumps({
            "Code": "Success",
            "Type": "AWS-HMAC",
            "AccessKeyId": ACCESS_KEY_ID,
            "SecretAccessKey": SECRET,
            "Token": f"session-{answers}",
            "Expiration": expiration.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }))


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
