#!/usr/bin/env python3
"""egress_servers.py DIR — the origin servers of the egress tests, on
127.0.0.1 only (ephemeral ports): a plain HTTP server and an HTTPS one
whose certificate (for 127.0.0.1 and tls.test) a CA of the test's own
signs (DIR/ca.pem; made with the openssl command).  Both answer:

  /echo          the request line and headers as the server saw them
  /redirect?to=U a 302 to U
  /bytes?n=N     N bytes of "x"

Writes "HTTP_PORT HTTPS_PORT" to DIR/ports when listening, then serves
until killed.  Every request line is appended to DIR/requests.log.
"""
import http.server
import os
import ssl
import subprocess
import sys
import threading
import urllib.parse

DIR = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        with open(os.path.join(DIR, 'requests.log'), 'a') as f:
            f.write(self.requestline + '\n')
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path == '/redirect':
            self.send_response(302)
            self.send_header('Location', q['to'][0])
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        if u.path == '/bytes':
            n = int(q['n'][0])
            self.send_response(200)
            self.send_header('Content-Length', str(n))
            self.end_headers()
            chunk = b'x' * 65536
            while n > 0:
                k = min(n, len(chunk))
                self.wfile.write(chunk[:k])
                n -= k
            return
        body = (self.requestline + '\n' + str(self.headers)).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def openssl(*args):
    subprocess.run(['openssl', *args], check=True, cwd=DIR, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_certs():
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj',
            '/CN=hutch egress test CA', '-keyout', 'ca.key', '-out', 'ca.pem')
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout',
            'leaf.key', '-out', 'leaf.csr')
    with open(os.path.join(DIR, 'ext.cnf'), 'w') as f:
        f.write('subjectAltName=IP:127.0.0.1,DNS:tls.test\n')
    openssl('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key',
            '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'leaf.pem')


def main():
    make_certs()
    plain = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    tls = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(DIR, 'leaf.pem'), os.path.join(DIR, 'leaf.key'))
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    for s in (plain, tls):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tmp = os.path.join(DIR, 'ports.tmp')
    with open(tmp, 'w') as f:
        f.write('%d %d\n' % (plain.server_address[1], tls.server_address[1]))
    os.rename(tmp, os.path.join(DIR, 'ports'))
    threading.Event().wait()


if __name__ == '__main__':
    main()
