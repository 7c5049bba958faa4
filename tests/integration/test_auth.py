"""routes.auth: API keys, JWT and Basic in front of a route, against the real
binary. Tokens are made by PyJWT (python3-jwt), keys by python3-cryptography,
password files by htpasswd (apache2-utils) and Python's crypt. Every refusal
is checked for its status, its WWW-Authenticate and its counter; no secret
may reach the error log."""

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from harness import WEIR_BIN, Client, proc_stat, render_config, slack, wait_until

jwt = pytest.importorskip("jwt")
crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: E402

HTPASSWD = shutil.which("htpasswd")

API_KEY = "k-alice-0123456789"
API_KEY2 = "k-bob-9876543210"
HS_SECRET = b"an HMAC secret of more than 32 bytes, for HS tokens"


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class Keys:
    """Every key a test signs with, and the files weir reads."""

    def __init__(self, d):
        self.d = str(d)
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.p256 = ec.generate_private_key(ec.SECP256R1())
        self.p384 = ec.generate_private_key(ec.SECP384R1())
        self.ed = ed25519.Ed25519PrivateKey.generate()
        self.other_p256 = ec.generate_private_key(ec.SECP256R1())
        self.rsa_pub_pem = self.rsa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.keys_file = self.path("keys")
        self.write_keys([("alice", API_KEY)])
        self.jwks_file = self.path("jwks.json")
        self.write_jwks()
        self.pem_file = self.path("es-pem.pem")
        with open(self.pem_file, "wb") as f:
            f.write(self.p256.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        self.htpasswd = self.path("htpasswd")
        self.write_users({"bob": "pw-bob"})

    def path(self, name):
        return os.path.join(self.d, name)

    def write_keys(self, pairs):
        with open(self.keys_file + ".new", "w") as f:
            f.write("# consumer sha256\n")
            for who, key in pairs:
                f.write("%s %s\n" % (who, sha(key)))
        os.rename(self.keys_file + ".new", self.keys_file)

    def write_jwks(self, extra=()):
        alg = jwt.algorithms
        keys = []
        for kid, a in (("rs256", "RS256"), ("rs384", "RS384"), ("rs512", "RS512"), ("ps256", "PS256")):
            k = json.loads(alg.RSAAlgorithm.to_jwk(self.rsa.public_key()))
            k.update(kid=kid, alg=a, use="sig")
            keys.append(k)
        for kid, key in (("es256", self.p256), ("es384", self.p384)):
            k = json.loads(alg.ECAlgorithm.to_jwk(key.public_key()))
            k.update(kid=kid)
            keys.append(k)
        k = json.loads(alg.OKPAlgorithm.to_jwk(self.ed.public_key()))
        k.update(kid="ed")
        keys.append(k)
        for kid, a in (("hs256", "HS256"), ("hs384", "HS384"), ("hs512", "HS512")):
            keys.append({"kty": "oct", "kid": kid, "alg": a, "k": b64u(HS_SECRET)})
        keys.extend(extra)
        with open(self.jwks_file + ".new", "w") as f:
            json.dump({"keys": keys}, f)
        os.rename(self.jwks_file + ".new", self.jwks_file)

    def write_users(self, users):
        lines = []
        for i, (u, pw) in enumerate(sorted(users.items())):
            if HTPASSWD and i % 2 == 0:
                # cost 8: some 17 ms a hash, so that hashing every guess would show in CPU time
                out = subprocess.run([HTPASSWD, "-nbB", "-C", "8", u, pw], check=True, capture_output=True,
                                     text=True).stdout.strip()
                lines.append(out)
            else:
                import crypt  # deprecated in 3.11, still there: SHA-crypt
                lines.append("%s:%s" % (u, crypt.crypt(pw, crypt.mksalt(crypt.METHOD_SHA512, rounds=5000))))
        with open(self.htpasswd + ".new", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.rename(self.htpasswd + ".new", self.htpasswd)

    def token(self, kid="es256", alg=None, key=None, **claims):
        alg = alg or {"rs256": "RS256", "rs384": "RS384", "rs512": "RS512", "ps256": "PS256", "es256": "ES256",
                      "es384": "ES384", "ed": "EdDSA", "hs256": "HS256", "hs384": "HS384", "hs512": "HS512",
                      "es-pem": "ES256"}[kid]
        if key is None:
            key = {"RS": self.rsa, "PS": self.rsa, "Ed": self.ed, "HS": HS_SECRET}.get(alg[:2])
            if alg == "ES256":
                key = self.p256
            elif alg == "ES384":
                key = self.p384
        body = {"sub": "carol", "iss": "https://issuer.test", "aud": "weir-tests", "email": "carol@example.test",
                "exp": int(time.time()) + 600}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        headers = {"kid": kid} if kid else {}
        return jwt.encode(body, key, algorithm=alg, headers=headers)


@pytest.fixture
def keys(tmp_path):
    d = tmp_path / "keys"
    d.mkdir()
    return Keys(d)


def policies(k, **over):
    """The auth groups of the test routes, by path."""
    p = {
        "/echo/key": 'type = "api_key"; keys_file = "%s"; query = "apikey"; header = "X-Api-Key"; '
                     'consumer_header = "X-Consumer";' % k.keys_file,
        "/echo/jwt": 'type = "jwt"; jwks_file = "%s"; issuer = "https://issuer.test"; audience = "weir-tests"; '
                     'leeway = "0"; cookie = "session"; consumer_header = "X-Consumer"; '
                     'claims_to_headers = [ "email:X-Email", "admin:X-Admin", "n:X-N", "bad:X-Bad" ];'
                     % k.jwks_file,
        "/echo/pem": 'type = "jwt"; keys = [ "%s" ];' % k.pem_file,
        "/echo/basic": 'type = "basic"; htpasswd = "%s"; realm = "tests"; consumer_header = "X-User"; '
                       'hash_rate = 5;' % k.htpasswd,
        "/echo/only": 'type = "api_key"; keys_file = "%s"; allow = [ "nobody" ];' % k.keys_file,
    }
    p.update(over)
    return p


def auth_config(w, origin, pols, workers=1):
    routes = [{"path": path, "upstream": "a"} for path in pols] + [{"path": "/", "upstream": "a"}]
    text = render_config(w.dir, w.port, w.stats_port, [{"name": "a", "servers": [origin.addr]}], routes,
                         workers=workers)
    for path, body in pols.items():
        old = 'path = "%s"; upstream = "a"; }' % path
        assert old in text
        text = text.replace(old, 'path = "%s"; upstream = "a"; auth = { %s }; }' % (path, body))
    return text


@pytest.fixture
def gate(weir_factory, origin, keys):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=1)
    w.write_raw_config(auth_config(w, origin, policies(keys)))
    w.start()
    return w


def ask(w, target, headers=()):
    with Client(w.port) as c:
        return c.request("GET", target, headers=list(headers) + [("Connection", "close")])


def upstream_headers(r):
    assert r.status == 200, r
    return {n.lower(): v for n, v in json.loads(r.body)["headers"]}


def counted(w, path, result, reason=None):
    labels = {"host": "*", "path": path, "result": result}
    if reason:
        labels["reason"] = reason
    return w.metrics()("weir_auth_total", **labels)


def assert_refused(r, status, challenge=None):
    assert r.status == status, r
    if challenge:
        assert r.get("WWW-Authenticate") == challenge, r
    else:
        assert not r.has("WWW-Authenticate"), r
    assert r.body == ("%d %s\n" % (status, r.reason)).encode(), r


def assert_no_secret_logged(w, *secrets):
    text = w.all_logs()
    for s in secrets:
        assert s not in text, "a secret reached a log: %r" % s


# ---------------------------------------------------------------------------
# API keys
# ---------------------------------------------------------------------------

def test_an_api_key_in_a_header_or_the_query_passes_with_its_consumer_upstream(gate):
    h = upstream_headers(ask(gate, "/echo/key", [("X-Api-Key", API_KEY), ("X-Consumer", "mallory")]))
    assert h["x-consumer"] == "alice"  # weir's, the client's dropped
    h = upstream_headers(ask(gate, "/echo/key/x?a=1&apikey=%s&b=2" % API_KEY.replace("-", "%2D")))
    assert h["x-consumer"] == "alice"
    # routes without auth never see a client's X-Consumer either
    assert "x-consumer" not in upstream_headers(ask(gate, "/echo/open", [("X-Consumer", "mallory")]))
    assert counted(gate, "/echo/key", "ok") == 2
    assert gate.metrics().error("forged_header") == 2


def test_a_missing_wrong_or_doubled_api_key_is_401_with_a_challenge_and_counted(gate):
    challenge = 'ApiKey realm="weir"'
    assert_refused(ask(gate, "/echo/key"), 401, challenge)
    assert_refused(ask(gate, "/echo/key", [("X-Api-Key", API_KEY + "x")]), 401, challenge)
    assert_refused(ask(gate, "/echo/key", [("X-Api-Key", API_KEY), ("X-Api-Key", API_KEY)]), 401, challenge)
    assert_refused(ask(gate, "/echo/key?apikey=%zz"), 401, challenge)
    m = gate.metrics()
    assert m("weir_auth_total", host="*", path="/echo/key", result="denied", reason="missing") == 1
    assert m("weir_auth_total", host="*", path="/echo/key", result="denied", reason="unknown_key") == 1
    assert m("weir_auth_total", host="*", path="/echo/key", result="denied", reason="malformed") == 2
    assert m.error("auth_required") == 4
    # one line a second at most, the first of them logged, the rest counted in the next
    wait_until(lambda: "auth on host * path /echo/key: missing -> 401 (0 more" in gate.read(gate.error_log),
               slack(2), what="the refusal's log line")
    assert gate.read(gate.error_log).count("auth on host") <= 2
    assert_no_secret_logged(gate, API_KEY)


def test_a_valid_key_of_a_consumer_not_allowed_is_403(gate):
    assert_refused(ask(gate, "/echo/only", [("X-Api-Key", API_KEY)]), 403)
    assert counted(gate, "/echo/only", "forbidden", "not_allowed") == 1


def test_a_refused_request_keeps_its_keepalive_connection_unless_a_body_was_left_unread(gate):
    with Client(gate.port) as c:
        r = c.request("GET", "/echo/key")
        assert r.status == 401 and "close" not in r.connection_tokens()
        r = c.request("GET", "/echo/key", headers=[("X-Api-Key", API_KEY)])
        assert r.status == 200
        r = c.request("POST", "/echo/key", body=b"x" * 10)
        assert r.status == 401, r


# ---------------------------------------------------------------------------
# Basic
# ---------------------------------------------------------------------------

def basic(user, pw):
    return ("Authorization", "Basic " + base64.b64encode(("%s:%s" % (user, pw)).encode()).decode())


def cpu_seconds(pid):
    f = proc_stat(pid)
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def hashes(w):
    return w.metrics()("weir_auth_password_hashes_total", host="*", path="/echo/basic")


def test_basic_against_bcrypt_and_sha_crypt_passes_the_user_upstream_and_hashes_once(gate, keys):
    keys.write_users({"bob": "pw-bob", "dave": "pw-dave"})  # bcrypt and $6$
    gate.signal(signal.SIGHUP)
    wait_until(lambda: gate.metrics()("weir_reloads_total", result="ok") >= 1, slack(5), what="reload")
    wait_until(lambda: ask(gate, "/echo/basic", [basic("dave", "pw-dave")]).status == 200, slack(5),
               what="new workers")
    assert upstream_headers(ask(gate, "/echo/basic", [basic("bob", "pw-bob")]))["x-user"] == "bob"
    before = hashes(gate)
    for _ in range(5):
        assert upstream_headers(ask(gate, "/echo/basic", [basic("dave", "pw-dave")]))["x-user"] == "dave"
        assert upstream_headers(ask(gate, "/echo/basic", [basic("bob", "pw-bob")]))["x-user"] == "bob"
    assert hashes(gate) == before  # all from the cache
    assert gate.metrics()("weir_auth_cached_total", host="*", path="/echo/basic") >= 10


def test_wrong_or_unknown_basic_credentials_are_401_with_the_realm(gate):
    challenge = 'Basic realm="tests", charset="UTF-8"'
    assert_refused(ask(gate, "/echo/basic"), 401, challenge)
    assert_refused(ask(gate, "/echo/basic", [basic("bob", "nope")]), 401, challenge)
    assert_refused(ask(gate, "/echo/basic", [basic("bob", "nope")]), 401, challenge)  # the cached refusal
    assert_refused(ask(gate, "/echo/basic", [basic("eve", "pw-bob")]), 401, challenge)
    assert_refused(ask(gate, "/echo/basic", [("Authorization", "Basic !!!!")]), 401, challenge)
    assert_refused(ask(gate, "/echo/basic", [("Authorization", "Basic " + base64.b64encode(b"bob:pw-bob\0x").decode())]),
                   401, challenge)
    assert_refused(ask(gate, "/echo/basic", [("Authorization", "Basic " + base64.b64encode(b"bob").decode())]),
                   401, challenge)
    m = gate.metrics()
    assert m("weir_auth_total", host="*", path="/echo/basic", result="denied", reason="bad_password") == 2
    assert m("weir_auth_total", host="*", path="/echo/basic", result="denied", reason="unknown_user") == 1
    assert m("weir_auth_total", host="*", path="/echo/basic", result="denied", reason="malformed") == 3
    assert m("weir_auth_password_hashes_total", host="*", path="/echo/basic") == 1
    assert_no_secret_logged(gate, "pw-bob", "nope")


def test_a_flood_of_password_guesses_is_held_to_the_hash_budget_while_known_users_pass(gate):
    good = [basic("bob", "pw-bob")]
    assert ask(gate, "/echo/basic", good).status == 200  # verified once, then cached
    worker = gate.worker_pids()[0]
    cpu0 = cpu_seconds(worker)
    start = time.monotonic()
    statuses = []
    with Client(gate.port) as c:
        for i in range(200):
            r = c.request("GET", "/echo/basic", headers=[basic("bob", "guess-%d" % i)])
            statuses.append(r.status)
            if r.status == 503:
                assert r.get("Retry-After") == "1", r
            if i % 20 == 0:
                assert c.request("GET", "/echo/basic", headers=good).status == 200
    elapsed = time.monotonic() - start
    cpu = cpu_seconds(worker) - cpu0
    assert set(statuses) <= {401, 503}
    # 200 bcrypt hashes at cost 8 would be some 3.5 s; the budget leaves a few
    assert cpu < 1.0 + 0.2 * elapsed, (cpu, elapsed)
    busy = statuses.count(503)
    # hash_rate = 5: a full bucket of 5, then 5 a second
    assert hashes(gate) <= 1 + 5 + 5 * elapsed + 1
    assert busy >= 200 - (5 + 5 * elapsed + 1)
    assert counted(gate, "/echo/basic", "busy", "hash_budget") == busy
    assert gate.metrics().error("auth_busy") == busy


# ---------------------------------------------------------------------------
# JWT
# ---------------------------------------------------------------------------

def bearer(tok):
    return [("Authorization", "Bearer " + tok)]


@pytest.mark.parametrize("kid", ["hs256", "hs384", "hs512", "rs256", "rs384", "rs512", "ps256", "es256", "es384",
                                 "ed"])
def test_a_token_of_each_algorithm_verifies_and_its_claims_go_upstream(gate, keys, kid):
    tok = keys.token(kid, admin=True, n=42, bad={"x": 1})
    h = upstream_headers(ask(gate, "/echo/jwt", bearer(tok) + [("X-Email", "forged@example.test")]))
    assert h["x-consumer"] == "carol"
    assert h["x-email"] == "carol@example.test"
    assert h["x-admin"] == "true"
    assert h["x-n"] == "42"
    assert "x-bad" not in h  # an object is no header value
    assert gate.metrics().error("auth_claim_dropped") == 1


def test_a_pem_key_is_chosen_by_its_file_name_or_by_its_algorithm_without_kid(gate, keys):
    assert ask(gate, "/echo/pem", bearer(keys.token("es-pem"))).status == 200
    assert ask(gate, "/echo/pem", bearer(keys.token(None, alg="ES256"))).status == 200
    assert ask(gate, "/echo/pem", bearer(keys.token("es256"))).status == 401  # not a kid it has


def test_a_token_in_the_cookie_is_taken_when_there_is_no_bearer_header(gate, keys):
    tok = keys.token("es256")
    r = ask(gate, "/echo/jwt", [("Cookie", "a=b; session=%s; c=d" % tok)])
    assert upstream_headers(r)["x-consumer"] == "carol"


def forged_none(keys):
    head = b64u(json.dumps({"alg": "none", "kid": "es256"}).encode())
    body = b64u(json.dumps({"sub": "carol", "iss": "https://issuer.test", "aud": "weir-tests",
                            "exp": int(time.time()) + 600}).encode())
    return "%s.%s." % (head, body), "%s.%s.%s" % (head, body, b64u(b"x"))


def hs_with_rsa_public_key(keys, kid):
    """The classic confusion: HS256 keyed with the RSA public key's PEM."""
    head = {"alg": "HS256", "typ": "JWT"}
    if kid:
        head["kid"] = kid
    head = b64u(json.dumps(head).encode())
    body = b64u(json.dumps({"sub": "carol", "iss": "https://issuer.test", "aud": "weir-tests",
                            "exp": int(time.time()) + 600}).encode())
    import hmac
    sig = hmac.new(keys.rsa_pub_pem, ("%s.%s" % (head, body)).encode(), hashlib.sha256).digest()
    return "%s.%s.%s" % (head, body, b64u(sig))


def flip_last(tok):
    head, body, sig = tok.split(".")
    raw = bytearray(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)))
    raw[5] ^= 1
    return "%s.%s.%s" % (head, body, b64u(bytes(raw)))


def test_the_classic_jwt_attacks_are_401_invalid_token_with_their_reason(gate, keys):
    now = int(time.time())
    none_empty, none_sig = forged_none(keys)
    good = keys.token("es256")
    cases = [
        (none_empty, "malformed"),            # no signature at all
        (none_sig, "algorithm"),              # "none" is no key's algorithm
        (hs_with_rsa_public_key(keys, "rs256"), "algorithm"),
        (hs_with_rsa_public_key(keys, None), "bad_signature"),  # tried against the HS keys: no match
        (keys.token("es256", exp=now - 5), "expired"),
        (keys.token("es256", nbf=now + 300), "not_yet_valid"),
        (keys.token("es256", iss="https://evil.test"), "issuer"),
        (keys.token("es256", iss=None), "issuer"),
        (keys.token("es256", aud="someone-else"), "audience"),
        (keys.token("es256", aud=["a", "b"]), "audience"),
        (keys.token("unknown", alg="ES256"), "unknown_kid"),
        (keys.token("es256", key=keys.other_p256), "bad_signature"),
        (flip_last(good), "bad_signature"),
        (good[:-1] + "*", "malformed"),                 # not base64url
        (good.replace(".", "..", 1), "malformed"),      # four parts
        (good + "=", "malformed"),                      # padding is not JWS
        (keys.token("es256", exp="tomorrow"), "malformed"),
    ]
    for tok, reason in cases:
        before = counted(gate, "/echo/jwt", "denied", reason)
        r = ask(gate, "/echo/jwt", bearer(tok))
        assert_refused(r, 401, 'Bearer realm="weir", error="invalid_token"')
        assert counted(gate, "/echo/jwt", "denied", reason) == before + 1, (tok, reason)
    assert keys.token("es256", aud=["a", "weir-tests"]) and \
        ask(gate, "/echo/jwt", bearer(keys.token("es256", aud=["a", "weir-tests"]))).status == 200
    assert_refused(ask(gate, "/echo/jwt"), 401, 'Bearer realm="weir"')
    # dates past any clock are still dates: far ahead or long gone
    assert ask(gate, "/echo/jwt", bearer(keys.token("es256", exp=1e300))).status == 200
    assert ask(gate, "/echo/jwt", bearer(keys.token("es256", exp=-1e300))).status == 401
    want_extra_expired = 1
    m = gate.metrics()
    want = {}
    for _, reason in cases:
        want[reason] = want.get(reason, 0) + 1
    want["expired"] += want_extra_expired
    for reason, n in want.items():
        assert m("weir_auth_total", host="*", path="/echo/jwt", result="denied", reason=reason) == n, reason
    assert m("weir_auth_total", host="*", path="/echo/jwt", result="denied", reason="missing") == 1
    assert_no_secret_logged(gate, good, good.split(".")[2])


def test_a_repeated_token_comes_from_the_cache_until_it_expires(gate, keys):
    tok = keys.token("rs256", exp=int(time.time()) + 3)
    for _ in range(10):
        assert ask(gate, "/echo/jwt", bearer(tok)).status == 200
    m = gate.metrics()
    assert m("weir_auth_cached_total", host="*", path="/echo/jwt") == 9
    assert m("weir_auth_total", host="*", path="/echo/jwt", result="ok") == 10
    wait_until(lambda: int(time.time()) >= int(jwt.decode(tok, options={"verify_signature": False})["exp"]),
               slack(5), what="the token's exp")
    assert ask(gate, "/echo/jwt", bearer(tok)).status == 401
    assert counted(gate, "/echo/jwt", "denied", "expired") == 1


# ---------------------------------------------------------------------------
# weir -t and reloads
# ---------------------------------------------------------------------------

def check(w):
    p = subprocess.run([WEIR_BIN, "-t", "-c", w.conf], capture_output=True, text=True, timeout=10)
    return p.returncode, p.stdout + p.stderr


def line_of(text, needle):
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_weir_t_names_a_bad_policy_or_key_file_with_its_line(weir_factory, origin, keys):
    bad_keys = keys.path("bad-keys")
    with open(bad_keys, "w") as f:
        f.write("alice %s\n\nbob not-a-digest\n" % sha("x"))
    apr1 = keys.path("apr1")
    with open(apr1, "w") as f:
        f.write("bob:$apr1$abc$0123456789012345678901\n")
    bad_json = keys.path("bad.json")
    with open(bad_json, "w") as f:
        f.write('{"keys": [ {"kty": "RSA", "n": "AQAB", "e": "AQAB"} ]}')
    broken_json = keys.path("broken.json")
    with open(broken_json, "w") as f:
        f.write('{"keys": [\n  {"kty": "EC",\n')
    cases = [
        ('type = "api_key"; keys_file = "%s";' % bad_keys, "%s line 3: the key must be given as its SHA-256" % bad_keys),
        ('type = "api_key"; keys_file = "%s/nope";' % keys.d, "No such file or directory"),
        ('type = "api_key";', "routes.auth.keys_file is required"),
        ('type = "basic"; htpasswd = "%s";' % apr1, "%s line 1: user bob: only bcrypt" % apr1),
        ('type = "jwt"; jwks_file = "%s";' % bad_json, "RSA keys must have at least 2048 bits"),
        ('type = "jwt"; jwks_file = "%s";' % broken_json, "%s line 3:" % broken_json),
        ('type = "jwt"; jwks_file = "%s"; htpasswd = "%s";' % (keys.jwks_file, apr1),
         'routes.auth.htpasswd is not a key of type "jwt"'),
        ('type = "jwt";', "needs jwks_file or keys"),
        ('type = "jwt"; keys = [ "%s" ]; claims_to_headers = [ "sub" ];' % keys.pem_file, "claim:Header-Name"),
        ('type = "jwt"; keys = [ "%s" ]; consumer_header = "Host";' % keys.pem_file, "consumer_header"),
        ('type = "jwt"; keys = [ "%s" ]; realm = "a\\"b";' % keys.pem_file, "realm"),
        ('type = "oauth";', 'routes.auth.type "oauth" is not one of api_key, jwt, basic'),
    ]
    for body, message in cases:
        w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                         routes=[{"path": "/", "upstream": "a"}])
        text = auth_config(w, origin, {"/x": body})
        w.write_raw_config(text)
        rc, out = check(w)
        assert rc != 0, (body, out)
        line = line_of(text, "auth = {")
        assert "%s:%d: " % (w.conf, line) in out, (body, out)
        assert message in out, (body, out)


def reloads(w, result="ok"):
    return w.metrics()("weir_reloads_total", result=result)


def hup_and_wait(w, result="ok"):
    before = reloads(w, result)
    w.signal(signal.SIGHUP)
    wait_until(lambda: reloads(w, result) > before, slack(10), what="reload %s" % result)


class Load:
    """Requests in a loop, each with credentials that stay valid across the
    reloads, on keep-alive connections renewed every 20 requests; bounded by
    <seconds> and stopped by stop()."""

    def __init__(self, w, requests, seconds=20):
        self.w, self.requests, self.seconds = w, requests, seconds
        self.done = self.failed = 0
        self.failures = []
        self.halt = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        end = time.monotonic() + self.seconds
        while not self.halt.is_set() and time.monotonic() < end:
            try:
                with Client(self.w.port) as c:
                    for i in range(20):
                        target, headers = self.requests[(self.done + i) % len(self.requests)]
                        r = c.request("GET", target, headers=headers)
                        if r.status != 200:
                            self.failed += 1
                            self.failures.append((target, r.status))
                        self.done += 1
                        if "close" in r.connection_tokens():
                            break
            except Exception as e:  # a cut connection is a failed request
                self.failed += 1
                self.failures.append(repr(e))

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.halt.set()
        self.t.join(timeout=30)


def test_each_key_file_reloads_under_load_without_a_failed_request_and_a_bad_one_keeps_the_old(
        weir_factory, origin, keys):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=2)
    w.write_raw_config(auth_config(w, origin, policies(keys), workers=2))
    w.start()
    load = [("/echo/key", [("X-Api-Key", API_KEY)]),
            ("/echo/jwt", bearer(keys.token("es256"))),
            ("/echo/basic", [basic("bob", "pw-bob")])]
    with Load(w, load) as run:
        wait_until(lambda: run.done > 50, slack(10), what="load running")
        # a second API key, a new signing key, a second user: the old ones stay
        keys.write_keys([("alice", API_KEY), ("bob", API_KEY2)])
        hup_and_wait(w)
        new_ec = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(new_ec.public_key()))
        jwk.update(kid="new")
        keys.write_jwks(extra=[jwk])
        hup_and_wait(w)
        keys.write_users({"bob": "pw-bob", "erin": "pw-erin"})
        hup_and_wait(w)
        # a broken file: the reload fails, the old configuration serves on
        with open(keys.keys_file, "a") as f:
            f.write("broken line\n")
        hup_and_wait(w, "failed")
        n = run.done
        wait_until(lambda: run.done > n + 50, slack(10), what="load after the reloads")
    assert run.failed == 0, run.failures[:10]
    assert ask(w, "/echo/key", [("X-Api-Key", API_KEY2)]).status == 200
    assert ask(w, "/echo/jwt", bearer(keys.token("new", alg="ES256", key=new_ec))).status == 200
    assert ask(w, "/echo/basic", [basic("erin", "pw-erin")]).status == 200
    assert "routes.auth.keys_file %s line" % keys.keys_file in w.read(w.error_log)



def test_a_worker_of_an_older_configuration_never_lets_a_route_that_gained_auth_through(
        weir_factory, origin, keys):
    """A worker still serving when a reload gives a route auth sees the new
    route table but has no policy for it: it must refuse (503), never pass
    the request on. The worker is held with SIGSTOP across the reload, so a
    request it has not read yet meets the new table; whether it then reads
    it or drains first (closing the connection unanswered) is libev's
    order, and both are fine: never a 200."""
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=1)
    pols = {"/echo/key": policies(keys)["/echo/key"]}
    w.write_raw_config(auth_config(w, origin, pols, workers=1).replace("auth = { %s };" % pols["/echo/key"], ""))
    w.start()
    with Client(w.port) as c:
        assert c.request("GET", "/echo/key").status == 200  # no auth yet, on this worker
        old = w.worker_pids()
        assert len(old) == 1
        os.kill(old[0], signal.SIGSTOP)
        try:
            w.write_raw_config(auth_config(w, origin, pols, workers=1))
            hup_and_wait(w)
            c.send(b"GET /echo/key HTTP/1.1\r\nHost: localhost\r\n\r\n")
            time.sleep(0.2)
        finally:
            os.kill(old[0], signal.SIGCONT)
        try:
            status = c.read_response().status
        except Exception:
            status = "closed"
    assert status in (503, "closed"), status
    stale = w.metrics()("weir_auth_total", host="*", path="/echo/key", result="error", reason="stale_worker")
    assert stale == (1 if status == 503 else 0)
    # the new worker has the policy
    assert ask(w, "/echo/key").status == 401
    assert ask(w, "/echo/key", [("X-Api-Key", API_KEY)]).status == 200


def test_weir_T_prints_each_policy_as_a_file_that_loads_to_the_same(weir_factory, origin, keys):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    w.write_raw_config(auth_config(w, origin, policies(keys)))

    def dump(conf):
        p = subprocess.run([WEIR_BIN, "-T", "-c", conf], capture_output=True, text=True, timeout=10)
        assert p.returncode == 0, p.stderr
        return p.stdout

    out = dump(w.conf)
    for want in ('auth = { type = "api_key"; realm = "weir"; consumer_header = "X-Consumer"; header = "X-Api-Key"; '
                 'query = "apikey"; keys_file = "%s"; }' % keys.keys_file,
                 'leeway = "off"; cookie = "session"; consumer_claim = "sub"; claims_to_headers = [ "email:X-Email", '
                 '"admin:X-Admin", "n:X-N", "bad:X-Bad" ]; }',
                 'keys = [ "%s" ]; }' % keys.pem_file, 'htpasswd = "%s"; hash_rate = 5; }' % keys.htpasswd,
                 'allow = [ "nobody" ]; }'):
        assert want in out, (want, out)
    assert "hash_rate" not in out.split("/echo/jwt")[1].split("\n")[0]  # only the keys of each type
    p = os.path.join(w.dir, "dumped.conf")
    with open(p, "w") as f:
        f.write(out)
    def body(text):  # but for the file it names and the token it masks
        return [line for line in text.splitlines()[1:] if "admin_token" not in line]
    assert body(dump(p)) == body(out)
    for secret in (API_KEY, sha(API_KEY), "pw-bob", b64u(HS_SECRET)):
        assert secret not in out
