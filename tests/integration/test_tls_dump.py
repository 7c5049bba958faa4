"""Key material stays out of core dumps: after real handshakes with an
ECDSA and an RSA certificate, the private keys' secret numbers are searched
for in the memory of the master and of every worker (read through
/proc/PID/mem). They must be found only in mappings the kernel leaves out
of a core dump (VmFlags "dd"); finding them there at all proves the search
works, so the test cannot pass by looking in the wrong place."""

import re
import subprocess

from harness import slack, wait_until
from test_tls import certs, start_tls_weir, client_ctx, tls_connect, https_get  # noqa: F401


def secret_numbers(key_path):
    """The private key's secret numbers, as big-endian bytes: the EC
    scalar, or the RSA exponent and primes."""
    text = subprocess.run(["openssl", "pkey", "-in", key_path, "-noout", "-text"], check=True,
                          capture_output=True, timeout=slack(10)).stdout.decode()
    out = []
    for label in ("priv", "privateExponent", "prime1", "prime2"):
        m = re.search(r"(?m)^%s:\s*\n((?:\s+[0-9a-f:]+\n)+)" % label, text)
        if m:
            out.append(bytes.fromhex(re.sub(r"[\s:]", "", m.group(1))).lstrip(b"\0"))
    assert out, text
    return out


def needles(numbers):
    """24-byte pieces of each number as stored big-endian (DER, PEM
    decoding) and as BoringSSL's BIGNUM and EC scalar keep them (64-bit
    little-endian words, least significant first: the bytes reversed)."""
    out = []
    for n in numbers:
        mid = len(n) // 2
        piece = n[mid - 12:mid + 12]
        out += [piece, piece[::-1]]
    return out


def mappings(pid):
    """(start, end, dontdump) for each readable mapping of <pid>."""
    maps, cur = [], None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", line)
            if m:
                cur = [int(m.group(1), 16), int(m.group(2), 16), m.group(3)[0] == "r", m.group(4)]
                maps.append(cur)
            elif line.startswith("VmFlags:"):
                cur.append(" dd" in line)
    return [(a, b, dd) for a, b, r, name, dd in maps if r and name != "[vsyscall]"]


# Larger mappings are the sanitizer's shadow and allocator reservations
# (terabytes, almost all unbacked); weir's own never come near this size.
MAPPING_MAX = 1 << 30
STEP = 16 << 20


def find(pid, pieces):
    """Where each piece occurs in <pid>'s memory: {"dumped": n, "kept": n}."""
    hits = {"dumped": 0, "kept": 0}
    overlap = max(len(p) for p in pieces) - 1
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for start, end, dd in mappings(pid):
            if end - start > MAPPING_MAX:
                continue
            tail = b""
            for at in range(start, end, STEP):
                try:
                    mem.seek(at)
                    data = tail + mem.read(min(STEP, end - at))
                except OSError:
                    break  # [vvar] and guard pages cannot be read
                for p in pieces:
                    hits["kept" if dd else "dumped"] += data.count(p)
                tail = data[-overlap:]
    return hits


def test_private_keys_only_in_dontdump_memory(weir_factory, origin, certs):  # noqa: F811
    w = start_tls_weir(weir_factory, origin, [certs["ec"], certs["rsa"]], workers=2)
    ctx = client_ctx(certs)
    # full handshakes with both certificates, on both workers (new
    # connections spread over the two listening sockets)
    for i in range(8):
        for name in ("app.test", "rsa.test"):
            s = tls_connect(w.port, ctx, name)
            head, body = https_get(s, "/", host=name)
            assert head.startswith("HTTP/1.1 200"), head
            s.close()
    # the same memory, as the stats socket reports it (workers publish it
    # every second)
    wait_until(lambda: w.metrics()("weir_tls_memory_bytes_in_use") > 0, slack(3),
               what="TLS memory in the metrics")
    m = w.metrics()
    assert m("weir_tls_memory_bytes_held") >= m("weir_tls_memory_bytes_in_use")
    pids = [w.proc.pid] + w.worker_pids()
    assert len(pids) == 3
    for key in (certs["ec"][1], certs["rsa"][1]):
        pieces = needles(secret_numbers(key))
        for pid in pids:
            hits = find(pid, pieces)
            assert hits["dumped"] == 0, "pid %d: %s's secret in dumpable memory: %r" % (pid, key, hits)
            assert hits["kept"] > 0, "pid %d: %s's secret not found at all: %r" % (pid, key, hits)
