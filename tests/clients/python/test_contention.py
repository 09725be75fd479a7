"""Mutual exclusion under contention (see contention.py): figures go to the terminal summary."""

import json
import os

import pytest

import contention

DURATION = float(os.environ.get("CONTENTION_SECONDS", "2.5"))
RESULTS = []


@pytest.mark.parametrize("mode", ["safe", "short"])
@pytest.mark.parametrize("protocol", ["redisson", "setnx"])
def test_contention(server, target, protocol, mode):
    res = contention.run(server.port, protocol, mode, procs=4, threads=2, locks=3, duration=DURATION)
    RESULTS.append(dict(target=target, **res))
    assert res["acquisitions"] > 20, res
    assert res["violations"] == 0, res  # a former holder's release/extend was accepted
    if mode == "safe":
        assert res["lost_updates"] == 0, res
        assert res["release_refused"] == 0, res
    else:
        assert res["fenced_lost_updates"] == 0, res
        # The mode must really exercise expired leases, or it proves nothing.
        assert res["release_refused"] + res["extend_refused"] > 0, res
        assert res["stale_write_rejected"] + res["stale_read_rejected"] > 0, res


def pytest_terminal_summary_lines():
    return [json.dumps(r) for r in RESULTS]
