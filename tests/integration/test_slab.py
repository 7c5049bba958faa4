"""The worker slab's health in /metrics (issue 16): per size class the bytes
in use, held, the high-water mark and the bytes held that no object can use;
after a surge the chunks it left wholly free go back to the kernel once
timeouts.slab_idle has passed, so the held gauge and the worker's RSS come
back down."""

import socket

from harness import proc_status, settle, simple, slack, wait_until

SURGE = 300  # connections, each holding a partial head: one buffer each


def held(m):
    """weir_slab_class_bytes{kind=...} summed over the classes, by kind."""
    out = {}
    for (name, labels), v in m.samples.items():
        if name == "weir_slab_class_bytes":
            kind = dict(labels)["kind"]
            out[kind] = out.get(kind, 0) + v
    return out


def test_every_slab_class_reports_in_use_held_high_water_and_unusable(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    w.get("/")

    def published():
        return any(n == "weir_slab_class_bytes" for n, _ in w.metrics().samples)

    wait_until(published, slack(5), what="per-class slab gauges")
    m = w.metrics()
    classes = {dict(l)["class"]: dict(l)["size"] for n, l in m.samples if n == "weir_slab_class_bytes"}
    assert len(classes) >= 4, classes  # connections, transactions, upstream connections, buffers
    for k, size in classes.items():
        g = {kind: m("weir_slab_class_bytes", **{"class": k, "size": size, "kind": kind})
             for kind in ("in_use", "held", "high_water", "unusable")}
        assert g["in_use"] + g["unusable"] <= g["held"] <= g["high_water"], (k, g)
        frag = m("weir_slab_class_fragmentation_ratio", **{"class": k, "size": size})
        assert 0 <= frag < 1, (k, frag)
        if g["held"]:
            assert abs(frag - g["unusable"] / g["held"]) < 1e-5
    # the per-class bytes add up to the whole slab's
    t = held(m)
    assert t["in_use"] == m("weir_slab_bytes_in_use")
    assert t["held"] == m("weir_slab_bytes_in_use") + m("weir_slab_bytes_free")


def test_after_a_surge_idle_chunks_go_back_to_the_kernel(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, timeouts={"slab_idle": "1s", "client_header": "20s"})
    w.get("/")
    pid = w.worker_pids()[0]
    settle(2.5)  # the baseline, published
    base = held(w.metrics())["held"]
    rss0 = proc_status(pid, "VmRSS")

    socks = []
    try:
        for _ in range(SURGE):
            s = socket.create_connection(("127.0.0.1", w.port), timeout=5)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # a head in progress
            socks.append(s)
        wait_until(lambda: held(w.metrics())["held"] > base + 4 * 1024 * 1024, slack(10),
                   what="the surge's buffers in the held gauge")
        peak = held(w.metrics())
        rss_peak = proc_status(pid, "VmRSS")
    finally:
        for s in socks:
            s.close()
    assert peak["in_use"] > 4 * 1024 * 1024, peak

    # wholly free chunks are unmapped 1 s (and up to a tick) after
    def released():
        return held(w.metrics())["held"] <= base + 1024 * 1024

    wait_until(released, slack(10), what="held back near its baseline")
    after = held(w.metrics())
    assert after["high_water"] >= peak["held"], (after, peak)
    assert after["in_use"] < 1024 * 1024, after
    rss1 = proc_status(pid, "VmRSS")
    # the kernel got the pages back, not just the gauge: the worker's RSS
    # (kB; the surge touched only the buffers' first pages) is back near
    # where it started
    assert rss_peak > rss0 + 1024, (rss0, rss_peak)
    assert rss1 < rss0 + 512, (rss0, rss_peak, rss1)
    # and the worker still serves
    assert w.get("/").status == 200
