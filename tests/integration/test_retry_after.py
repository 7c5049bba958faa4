"""An upstream's Retry-After on a retried status (issue 13, item 5): up to
retry.retry_after_max (default 1 s) it is the wait before the retry, in
seconds or as an HTTP-date; longer, the answer is returned at once and not
retried; retry_after_max = "off" ignores it."""

import subprocess
import time

import pytest

from harness import WEIR_BIN, free_port
from test_retry import ask, results, retry, retry_weir


def origin_hits(*origins):
    return sum(len(o.requests("/retry-after")) for o in origins)


@pytest.mark.normal_only
def test_a_retry_after_within_the_cap_is_the_backoff(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["503"], attempts=2))
    # both answer 503 with Retry-After: 1: the retry waits that second (the
    # jittered backoff alone is at most max_backoff, 250 ms), then the
    # last answer is returned
    t0 = time.monotonic()
    (r,) = ask(w, "/retry-after/503/1", 1)
    took = time.monotonic() - t0
    assert r.status == 503 and r.get("Retry-After") == "1", r
    assert took >= 0.95, took
    assert origin_hits(a, b) == 2
    assert results(w, "attempted") == 1 and results(w, "retry_after") == 1
    # as an HTTP-date two seconds ahead, within a 3 s cap: a wait of more
    # than one second (the date has whole seconds), then B's 200
    w2 = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["503"], attempts=2, retry_after_max="3s"))
    a.clear_log()
    b.clear_log()
    t0 = time.monotonic()
    got = ask(w2, "/on/A/retry-after/503/date2", 2)
    took = time.monotonic() - t0
    assert [r.status for r in got] == [200, 200], got
    assert took >= 0.95, took
    assert results(w2, "retry_after") == 1 and results(w2, "succeeded") == 1


def test_a_retry_after_past_the_cap_returns_the_answer_unretried(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["503"], attempts=3))
    t0 = time.monotonic()
    got = ask(w, "/retry-after/503/5", 2) + ask(w, "/retry-after/503/date30", 2)
    took = time.monotonic() - t0
    # the server's own answer and its Retry-After reach the client; one try each
    assert [r.status for r in got] == [503] * 4, got
    assert got[0].get("Retry-After") == "5" and got[2].get("Retry-After").endswith(" GMT"), got
    assert origin_hits(a, b) == 4
    assert results(w, "attempted") == 0 and results(w, "retry_after_too_long") == 4
    assert took < 4.5, took  # nobody waited the 5 s asked for
    # a value that is no wait at all (nor a date) is no reason to keep the
    # answer: the usual backoff, and the retry goes to B
    (r,) = ask(w, "/on/A/retry-after/503/soon", 1)
    assert r.status == 200 and r.get("X-Origin") == "B", r


def test_retry_after_max_off_ignores_retry_after(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["503"], attempts=2, retry_after_max="off"))
    got = ask(w, "/on/A/retry-after/503/5", 2)
    assert all(r.status == 200 and r.get("X-Origin") == "B" for r in got), got
    assert results(w, "attempted") == 1 and results(w, "retry_after") == 0
    assert results(w, "retry_after_too_long") == 0


def test_weir_t_refuses_a_bad_retry_after_max_with_file_and_line(tmp_path):
    conf = tmp_path / "check.conf"
    conf.write_text('listeners = ( { address = "127.0.0.1:%d"; } );\n'
                    'upstreams = ( { name = "a"; servers = ( { address = "127.0.0.1:1"; } );\n'
                    '  retry = { on = [ "503" ];\n    retry_after_max = "soon"; }; } );\n'
                    'routes = ( { upstream = "a"; } );\n' % free_port())
    p = subprocess.run([WEIR_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=10)
    assert p.returncode == 1, p
    err = p.stderr.decode()
    assert "check.conf:4:" in err and "retry_after_max" in err, err
