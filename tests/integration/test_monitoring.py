"""monitoring/: the Prometheus alerting rules and the Grafana dashboard that
the packages ship in /usr/share/weir. The rules pass `promtool check
rules` and their unit tests (`promtool test rules`); every query of the
dashboard parses; and every weir metric they name is one that a running
weir serves."""

import json
import os
import re
import shutil
import subprocess

import pytest

from harness import slack
from pki import make_ca, make_leaf, san
from test_tls import start_tls_weir

HERE = os.path.dirname(os.path.abspath(__file__))
MON = os.path.join(HERE, "..", "..", "monitoring")
RULES = os.path.join(MON, "weir-alerts.yml")
DASHBOARD = os.path.join(MON, "weir-dashboard.json")


def promtool(*args, cwd=MON):
    if not shutil.which("promtool"):
        pytest.fail("promtool is missing: tests/install-deps installs it (Debian's prometheus)")
    r = subprocess.run(["promtool"] + list(args), capture_output=True, text=True, timeout=slack(60), cwd=cwd)
    return r.returncode, r.stdout + r.stderr


def dashboard_queries():
    d = json.load(open(DASHBOARD))
    out = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    out += [a["expr"] for a in d["annotations"]["list"] if "expr" in a]
    return out


def weir_metric_names(text):
    return set(re.findall(r"\bweir_[a-z0-9_]+", text))


def test_promtool_checks_the_alerting_rules():
    rc, out = promtool("check", "rules", RULES)
    assert rc == 0 and "SUCCESS" in out, out


def test_promtool_unit_tests_of_the_alerting_rules_pass():
    rc, out = promtool("test", "rules", "weir-alerts.test.yml")
    assert rc == 0 and "SUCCESS" in out, out
    # every alert of the file has a test that expects it to fire
    alerts = set(re.findall(r"(?m)^\s+- alert: (\w+)", open(RULES).read()))
    tests = open(os.path.join(MON, "weir-alerts.test.yml")).read()
    tested = set(re.findall(r"(?ms)alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels", tests))
    assert alerts and alerts == tested, sorted(alerts ^ tested)


def test_every_dashboard_query_parses(tmp_path):
    # as recording rules, with Grafana's variables given values
    queries = dashboard_queries()
    assert len(queries) >= 20
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for i, q in enumerate(queries):
        q = q.replace("$__rate_interval", "5m").replace("$instance", ".+")
        lines += ["      - record: dashboard_query_%d" % i, "        expr: %s" % json.dumps(q)]
    p = tmp_path / "dashboard-rules.yml"
    p.write_text("\n".join(lines) + "\n")
    rc, out = promtool("check", "rules", str(p))
    assert rc == 0, out
    d = json.load(open(DASHBOARD))
    assert d["uid"] and d["title"] == "weir"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_the_rules_and_the_dashboard_name_only_metrics_weir_serves(weir_factory, origin, tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    make_ca(d)
    w = start_tls_weir(weir_factory, origin, [make_leaf(d, "app", "/CN=app.test", [san("app.test")])])
    m = w.metrics()
    # families this config has no series of (weir_upstream_health without
    # a health block) are served all the same: their TYPE line says so
    served = set(re.findall(r"^# TYPE (\S+)", m.text, re.M))
    for name in m.names():
        served.add(name)
        served.add(re.sub(r"_(bucket|count|sum)$", "", name))
    for path, text in ((RULES, open(RULES).read()), (DASHBOARD, "\n".join(dashboard_queries()))):
        unknown = sorted(weir_metric_names(text) - served)
        assert not unknown, "%s names metrics weir does not serve: %s" % (os.path.basename(path), unknown)
    assert "weir_tls_certificate_expiry_seconds" in weir_metric_names(open(RULES).read())
