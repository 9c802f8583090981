"""Persistent scratch under threads (kernels/_stream_buffers.py): a launcher's remembered call keeps
the buffers it fetched last in one KeptBuffers, shared by every thread that repeats the call. An
engine that samples from several threads, each on its own CUDA stream, must still get each stream's
own buffers: two launches on two streams writing one scratch buffer (partial sums, race candidates,
arrival counters) would corrupt each other's tokens without any error.

The CPU test is a race detector, not a proof: four threads, each its own fake stream, call one
KeptBuffers 20,000 times with the interpreter's switch interval at 1 µs. Its power was measured on
the version it guards against (key and buffers stored as two attributes, `return self.buffers` after
both): 202-377 of 80,000 gets returned another thread's buffers, in 8 of 8 runs. The fixed version
returns what it read or fetched itself, so it cannot fail this test (no flakiness). The GPU test
runs the real chain launcher from two threads on two streams and compares every output with the
same calls made serially.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import torch

from specsample.kernels import _stream_buffers as sb


def test_each_thread_gets_the_buffers_of_its_own_stream(monkeypatch):
    threads, calls = 4, 20_000
    kept = sb.KeptBuffers()
    monkeypatch.setattr(sb, "_stream_key", lambda device: ("fake-stream", threading.get_ident()))
    wrong = []

    def repeat_calls():
        me = threading.get_ident()
        got = [kept.get(None, lambda: (me,)) for _ in range(calls)]
        wrong.append(sum(g != (me,) for g in got))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=repeat_calls) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(wrong) == threads
    assert sum(wrong) == 0, f"{sum(wrong)} of {threads * calls} gets returned another stream's buffers"


def test_kept_buffers_are_refetched_when_the_stream_or_generation_changes(monkeypatch):
    stream = ["a"]
    monkeypatch.setattr(sb, "_stream_key", lambda device: stream[0])
    kept, fetches = sb.KeptBuffers(), []

    def fetch():
        fetches.append(stream[0])
        return (stream[0], len(fetches))

    assert kept.get(None, fetch) == ("a", 1)
    assert kept.get(None, fetch) == ("a", 1) and kept.buffers == ("a", 1)  # kept
    stream[0] = "b"
    assert kept.get(None, fetch) == ("b", 2)
    sb.discard_stream_buffers("no-such-buffer")  # bumps the generation
    assert kept.get(None, fetch) == ("b", 3)
    assert fetches == ["a", "b", "b"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA streams")
def test_threads_on_two_streams_get_the_serial_outputs():
    """Deterministic outputs (explicit uniforms) of 200 repeat calls per thread, two threads each on
    its own stream, inputs alternating so that a call reading another's scratch changes tokens: all
    equal the same calls made on one thread."""
    from specsample import chain_rejection_sample

    g = torch.Generator(device="cuda").manual_seed(11)
    batch, k, vocab, calls = 64, 4, 32000, 200
    inputs = []
    for _ in range(4):
        p = torch.softmax(4 * torch.randn(batch, k + 1, vocab, device="cuda", generator=g), -1)
        q = torch.softmax(4 * torch.randn(batch, k, vocab, device="cuda", generator=g), -1)
        x = torch.randint(0, vocab, (batch, k), device="cuda", generator=g)
        u = torch.rand(batch, k + 1, device="cuda", generator=g)
        inputs.append((p, x, q, u))

    def run(which):
        return [chain_rejection_sample(*inputs[which(i)][:3], uniforms=inputs[which(i)][3]).tokens
                for i in range(calls)]  # fmt: skip

    plans = [lambda i: i % 2, lambda i: 2 + i % 2]
    expected = [torch.stack(run(plan)).cpu() for plan in plans]
    got = [None, None]

    def worker(t):
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            out = torch.stack(run(plans[t]))
        stream.synchronize()
        got[t] = out.cpu()

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for t in range(2):
        differ = int((got[t] != expected[t]).any(-1).sum())
        assert differ == 0, f"thread {t}: {differ} of {calls * batch} rows differ from the serial calls"
    assert np.unique(expected[0][0].numpy()).size > 1  # the check compares real tokens
