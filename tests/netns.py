"""netns.py: the network namespaces of the suites that build a network of
their own, the chaos bed (tests/chaos/bed.py) and the fleet
(tests/fleet/fleet.py); root only.

Principle: a run's namespaces are named <tag><pid>-<short> ("wch812-w"),
so two runs never touch each other's, and those of a run that was killed
(SIGKILL skips every clean-up) are found by the next from the dead pid in
their name. Each namespace made is recorded where it is made, so that
remove_all() undoes them whatever failed. Veth pairs are made inside the
namespaces with their peers moved straight into the other one, so no
interface of ours ever exists in the host's namespace.
"""

import os
import re
import signal
import subprocess


class NetnsError(RuntimeError):
    """A command failed or timed out: its line and what it said."""


def run(args, check=True, timeout=20, input=None):
    """Runs <args>; its stdout. Raises NetnsError on a timeout, or on a
    non-zero exit with <check>."""
    args = list(args)
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired:
        raise NetnsError("timed out after %ss: %s" % (timeout, " ".join(args)))
    if check and r.returncode != 0:
        raise NetnsError("%s: exit %d: %s" % (" ".join(args), r.returncode, (r.stderr or r.stdout).strip()))
    return r.stdout


def exec_argv(ns, argv):
    """<argv> run inside namespace <ns>."""
    return ["ip", "netns", "exec", ns] + list(argv)


def name(tag, short, pid=None):
    return "%s%d-%s" % (tag, os.getpid() if pid is None else pid, short)


class Namespaces:
    def __init__(self, tag):
        self.tag = tag
        self.made = []  # in the order made

    def name(self, short):
        return name(self.tag, short)

    def add(self, short):
        """Makes namespace <short> of this run, its loopback up; its name."""
        ns = self.name(short)
        run(["ip", "netns", "add", ns])
        self.made.append(ns)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        return ns

    def veth(self, made_in, a, ns_a, b, ns_b):
        """A veth pair made in namespace <made_in>: end <a> in <ns_a>, end
        <b> in <ns_b> (either may be <made_in>)."""
        args = ["ip", "-n", made_in, "link", "add", a, "type", "veth", "peer", "name", b]
        run(args + (["netns", ns_b] if ns_b != made_in else []))
        if ns_a != made_in:
            run(["ip", "-n", made_in, "link", "set", a, "netns", ns_a])

    def address(self, ns, dev, cidr):
        """Gives <dev> of <ns> the address <cidr> ("10.98.1.1/24") and sets it up."""
        run(["ip", "-n", ns, "addr", "add", cidr, "dev", dev])
        run(["ip", "-n", ns, "link", "set", dev, "up"])

    def sysctl(self, ns, *settings):
        """Sets "key=value" <settings> inside <ns>."""
        run(exec_argv(ns, ["sysctl", "-q", "-w"] + list(settings)))

    def remove_all(self):
        """Deletes every namespace made, last first, after killing what
        still runs inside (only this run starts processes there)."""
        for ns in reversed(self.made):
            for pid in run(["ip", "netns", "pids", ns], check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            run(["ip", "netns", "del", ns], check=False)
        self.made = []


def remove_stale(tag, shorts, log=None):
    """Deletes the namespaces <tag><pid>-<short> (<short> matching the
    regular expression <shorts>) of runs whose pid is gone. One with a
    process still inside is left alone (and said to <log>): what runs
    there is not ours to kill."""
    try:
        names = run(["ip", "netns", "list"], check=False).splitlines()
    except (OSError, NetnsError):
        return
    for line in names:
        ns = line.split()[0] if line.split() else ""
        m = re.match(r"^%s(\d+)-(%s)$" % (re.escape(tag), shorts), ns)
        if not m or os.path.exists("/proc/" + m.group(1)):
            continue
        if run(["ip", "netns", "pids", ns], check=False).strip():
            if log:
                log("stale namespace %s still has processes: left alone" % ns)
            continue
        run(["ip", "netns", "del", ns], check=False)
        if log:
            log("removed stale namespace %s" % ns)
