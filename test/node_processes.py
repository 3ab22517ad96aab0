"""Console processes of the suite started by tests: their output lines, each with the time it was read."""
import subprocess
import threading
import time


class Output:
    """A process's output lines, each with the monotonic time it was read."""

    def __init__(self, proc):
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))

    def first(self, text):
        """(time, line) of the first line containing `text`, or None."""
        return next(((t, line) for t, line in self.lines if text in line), None)

    def wait_for(self, text, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            if self.first(text):
                return self.first(text)
            time.sleep(0.02)
        raise AssertionError(f"no line with {text!r} in: " + "\n".join(line for _, line in self.lines))

    def text(self):
        return "\n".join(line for _, line in self.lines)


def start(*cmd):
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, Output(proc)


def stop(proc, out):
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=20)
    out.thread.join(2.0)
    return proc.returncode
