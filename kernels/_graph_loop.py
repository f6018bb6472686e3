"""A fixed EM loop captured once as a CUDA graph and replayed, for kernels/full and kernels/tied (internal).

The body touches only static buffers (parameters in place, ell per iteration, a status flag), so a replay
is the whole fit without a host round trip. It runs once on a side stream first, so compilation and first
allocations happen outside the capture."""
from __future__ import annotations

import torch

_CACHE: dict = {}
_MAX_CACHED = 4


class GraphedLoop:
    def __init__(self, body, device):
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            body()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            body()

    def replay(self) -> None:
        self.graph.replay()


class GraphedFit:
    """The static buffers of one (X, settings) fit -- ``state`` = [weights, means, covariances, precisions
    Cholesky], ell per iteration, the ok flag -- and the graph of ``iterate(state, lls, ok)`` over them (the
    full and the tied loop alike). ``ws`` is the workspace whose center the loop reads."""

    def __init__(self, state, n_iter, ws, iterate):
        dev = state[0].device
        self.state, self.ws = state, ws
        self.lls = torch.zeros(n_iter, dtype=torch.float64, device=dev)
        self.ok = torch.ones((), dtype=torch.bool, device=dev)

        def body():
            self.ok.fill_(True)
            iterate(self.state, self.lls, self.ok)

        self.loop = GraphedLoop(body, dev)

    def run(self, weights, means, U, center64):
        for buf, value in zip(self.state[:2] + self.state[3:], (weights, means, U)):
            buf.copy_(value)
        self.ws.center64.copy_(center64)
        self.ws.center[: center64.shape[0]].copy_(center64)
        self.loop.replay()
        return [t.clone() for t in self.state], self.lls.clone(), bool(self.ok)


def cached(key, build):
    """The cached object for ``key``, made by ``build()`` on a miss (at most a few kept: each holds a graph
    and its buffers)."""
    if key not in _CACHE:
        while len(_CACHE) >= _MAX_CACHED:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = build()
    return _CACHE[key]
