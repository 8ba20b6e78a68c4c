#!/usr/bin/env python3
"""egress_servers.py DIR — the origin servers of the egress tests, on
127.0.0.1 only (ephemeral ports): a plain HTTP server and an HTTPS one
whose certificate (for 127.0.0.1, tls.test and secret.test) a CA of the
test's own signs (DIR/ca.pem; made with the openssl command), and two
HTTPS servers hutch must refuse to talk to: one whose certificate that CA
signs for another name (other.test), one whose certificate another CA
(DIR/rogue-ca.pem, trusted by nobody) signs.  All answer:

  /echo          the request line and headers as the server saw them (an
                 origin that reflects what it is sent)
  /redirect?to=U a 302 to U
  /bytes?n=N     N bytes of "x"

Writes "HTTP_PORT HTTPS_PORT WRONG_NAME_PORT ROGUE_PORT" to DIR/ports when
listening, then serves until killed.  Every request line is appended to
DIR/requests.log, and every request's line and headers to DIR/headers.log
(what the origin received, for the tests to read).
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
        with open(os.path.join(DIR, 'headers.log'), 'a') as f:
            f.write(self.requestline + '\n' + str(self.headers))
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


def leaf(name, san, ca):
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=' + name, '-keyout',
            name + '.key', '-out', name + '.csr')
    with open(os.path.join(DIR, name + '.cnf'), 'w') as f:
        f.write('subjectAltName=%s\n' % san)
    openssl('x509', '-req', '-in', name + '.csr', '-CA', ca + '.pem', '-CAkey', ca + '.key',
            '-CAcreateserial', '-days', '2', '-extfile', name + '.cnf', '-out',
            name + '.pem')


def make_certs():
    for ca, cn in (('ca', 'hutch egress test CA'), ('rogue-ca', 'a CA nobody trusts')):
        openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj',
                '/CN=' + cn, '-keyout', ca + '.key', '-out', ca + '.pem')
    leaf('leaf', 'IP:127.0.0.1,DNS:tls.test,DNS:secret.test', 'ca')
    leaf('other', 'DNS:other.test', 'ca')
    leaf('rogue', 'DNS:rogue.test', 'rogue-ca')


def https_server(name):
    s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(DIR, name + '.pem'), os.path.join(DIR, name + '.key'))
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    return s


def main():
    make_certs()
    servers = [http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)]
    servers += [https_server(n) for n in ('leaf', 'other', 'rogue')]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tmp = os.path.join(DIR, 'ports.tmp')
    with open(tmp, 'w') as f:
        f.write(' '.join(str(s.server_address[1]) for s in servers) + '\n')
    os.rename(tmp, os.path.join(DIR, 'ports'))
    threading.Event().wait()


if __name__ == '__main__':
    main()
