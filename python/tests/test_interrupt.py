"""Ctrl-C during a long forward pass: the pass stops within a layer and raises KeyboardInterrupt."""

import os
import signal
import subprocess
import sys
import textwrap


def test_ctrl_c_stops_a_forward_pass(model_path):
    # A float64 pass over 2048 tokens takes several seconds; SIGINT is sent once the pass has started. The
    # child installs Python's Ctrl-C handler itself: a process started in the background by a non-interactive
    # shell inherits SIGINT ignored, and Python then leaves it ignored.
    script = textwrap.dedent(f"""
        import signal, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import ropescope as rs
        m = rs.Model({model_path!r}, precision="f64")
        ids = [(7 * i + 3) % 49152 for i in range(2048)]
        print("ready", flush=True)
        start = time.monotonic()
        try:
            m.forward(ids, capture=(), logits=True)
            print("completed", flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        m.forward(ids[:8], capture=("attn",))
        print("usable", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    import time

    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    lines = out.split()
    assert lines == ["interrupted", "usable"], (out, err)
