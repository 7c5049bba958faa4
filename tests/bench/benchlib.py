"""benchlib.py: what the Python benchmarks in tests/bench share."""
import os, socket, time


def write(directory, name, text):
    """Writes <text> to <directory>/<name>; returns the path."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_port(port, deadline=10.0):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")
