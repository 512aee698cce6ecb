"""parity.logprobs.compare on arrays equals `parity logprobs` on the same data written to files,
exactly: the same `overall` keys and values, the same slices."""
import json
import subprocess

import numpy as np
import pytest

import parity
from conftest import cli, needs_cli


def _data(seed=0, shape=(16, 300)):
    rng = np.random.default_rng(seed)
    a = -rng.exponential(size=shape).astype(np.float32)
    # perturbed copies clipped to <= 0: values that cannot be logprobs are input errors (docs/logprobs.md)
    b = np.minimum(a + rng.normal(scale=2e-3, size=shape), 0).astype(np.float32)
    a2 = np.minimum(a + rng.normal(scale=1e-3, size=shape), 0).astype(np.float32)
    ids = rng.integers(0, 50000, size=shape).astype(np.int64)
    mask = (rng.random(shape) > 0.1).astype(np.uint8)
    return a, b, a2, ids, mask


def _cli(args, tmp_path):
    out = tmp_path / "lp.json"
    p = subprocess.run([cli(), "logprobs"] + args + ["--json", str(out)], stdout=subprocess.DEVNULL, check=False)
    d = json.loads(out.read_text())
    d["exit_code"] = p.returncode
    return d


@needs_cli
def test_arrays_equal_cli_on_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    a, b, a2, ids, mask = _data()
    for name, lp in (("a", a), ("b", b), ("a2", a2)):
        st.save_file({"logprobs": lp, "token_ids": ids, "mask": mask}, str(tmp_path / (name + ".safetensors")))
    want = _cli([str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors"),
                 "--floor-a", str(tmp_path / "a2.safetensors")], tmp_path)
    got = parity.logprobs.compare(a, b, floor=a2, token_ids_a=ids, mask=mask)
    assert got.overall == want["overall"]
    assert got.slices == want["slices"]
    assert got.counts == want["counts"]
    f = parity.logprobs.compare_files(tmp_path / "a.safetensors", tmp_path / "b.safetensors",
                                      floor=tmp_path / "a2.safetensors")
    assert f.overall == want["overall"]


@needs_cli
def test_arrays_equal_cli_on_npy_with_options(tmp_path):
    a, b, _, ids, _ = _data(1, (4, 1000))
    b64 = b.astype(np.float64)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b64)
    want = _cli([str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--dtype", "fp32", "--k3-alarm", "1e-9"], tmp_path)
    got = parity.logprobs.compare(a, b64, dtype="fp32", k3_alarm=1e-9)
    assert got.overall == want["overall"] and got.slices == want["slices"]
    assert got.verdict == "drift" and got.exit_code == want["exit_code"] == 1


def test_divergence_and_errors():
    a, b, _, ids, _ = _data(2, (2, 50))
    ids_b = ids.copy()
    ids_b[1, 20] += 1
    r = parity.logprobs.compare(a, b, token_ids_a=ids, token_ids_b=ids_b)
    assert len(r.divergences) == 1 and r.divergences[0]["position"] == 20
    with pytest.raises(ValueError, match="shape"):
        parity.logprobs.compare(a, b[:, :-1], token_ids_a=ids)
    with pytest.raises(TypeError, match="unknown option"):
        parity.logprobs.compare(a, b, bogus=1)
