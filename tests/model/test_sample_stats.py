r"""The CPU sampler against NumPy, statistically and exactly.

For a few logit vectors (random normal, a shuffled Zipf-like "language model"
row, one with many ties) and settings (temperature 0.7 and 1.3, top_k 5,
top_p 0.9, min_p 0.1, all combined, and a mask with bias and penalties), the
target distribution is computed here with NumPy, independently of the C code:
penalties, mask, softmax at the temperature, top-k by (logit descending, id),
top-p as the shortest sorted prefix reaching the mass, min-p relative to the
most likely token, renormalizing after each rule (sample.h documents these
semantics). Then, with `sample_cli` (env SAMPLE_CLI_BIN; the test fails when
it is unset):

- 20,000 draws with a fixed seed never leave the NumPy support, and a
  chi-square goodness-of-fit test (bins with an expected count under 5
  merged) has p >= 1e-3. The seed is fixed, so the outcome is deterministic;
  the threshold is not tuned per case.
- The sampler's own distribution (`--probs`) equals NumPy's to 1e-9.
- The same draws against a slightly wrong target (temperature off by 0.1,
  top_p 0.8 for 0.9) give p < 1e-6: the test has the power to fail.

Each fixture is also checked for margin: no top-p or min-p boundary is within
1e-6 of a tie, so float rounding cannot make the support ambiguous.

The p-value comes from the closed form of the chi-square survival function
for integer degrees of freedom (a finite sum; erfc for odd ones), checked
here against tabulated critical values. No SciPy needed.
"""
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest

DRAWS = 20_000
ALPHA = 1e-3
MARGIN = 1e-6


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("SAMPLE_CLI_BIN")
    if not path:
        pytest.fail("SAMPLE_CLI_BIN is not set: build the sample_cli target and point it at the binary")
    if not pathlib.Path(path).is_file():
        pytest.fail("SAMPLE_CLI_BIN=%s is not a file" % path)
    return path


# ---- chi-square -------------------------------------------------------------


def chi2_sf(x, k):
    """P(X >= x) for X ~ chi-square with k (integer >= 1) degrees of freedom."""
    if x <= 0:
        return 1.0
    h = x / 2.0
    if k % 2 == 0:
        # e^-h * sum_{i < k/2} h^i / i!, terms in log space (no overflow).
        return min(1.0, sum(math.exp(-h + i * math.log(h) - math.lgamma(i + 1)) for i in range(k // 2)))
    # erfc(sqrt(h)) + sqrt(2x/pi) e^-h * sum_{i=1}^{(k-1)/2} x^(i-1) / (2i-1)!!
    s = math.erfc(math.sqrt(h))
    log_dfact = 0.0  # log((2i-1)!!)
    for i in range(1, (k - 1) // 2 + 1):
        log_dfact += math.log(2 * i - 1)
        s += math.exp(0.5 * math.log(2 * x / math.pi) - h + (i - 1) * math.log(x) - log_dfact)
    return min(1.0, s)


def test_chi2_sf_table():
    # Upper 5% and 0.1% points of the chi-square distribution.
    for x, k, p in [(3.841459, 1, 0.05), (5.991465, 2, 0.05), (7.814728, 3, 0.05), (11.070498, 5, 0.05),
                    (18.307038, 10, 0.05), (124.342113, 100, 0.05), (10.827566, 1, 0.001),
                    (29.588298, 10, 0.001), (149.449252, 100, 0.001), (1.0, 2, math.exp(-0.5))]:
        assert chi2_sf(x, k) == pytest.approx(p, rel=1e-5), (x, k)


def chi_square(counts, probs, n):
    """(p-value, dof) of counts against probs (support only; small bins merged)."""
    exp_ = probs * n
    big = exp_ >= 5
    obs_b, exp_b = list(counts[big]), list(exp_[big])
    if (~big).any():
        obs_b.append(counts[~big].sum())
        exp_b.append(exp_[~big].sum())
    obs_b, exp_b = np.array(obs_b, float), np.array(exp_b, float)
    if len(obs_b) < 2:
        return 1.0, 0
    stat = float(((obs_b - exp_b) ** 2 / exp_b).sum())
    dof = len(obs_b) - 1
    return chi2_sf(stat, dof), dof


# ---- the target distribution in NumPy -----------------------------------------


def target(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, allow=None, bias=(), context=(),
           accept=(), repetition=1.0, presence=0.0, frequency=0.0):
    """(probs over the vocabulary, smallest margin of a top-p / min-p decision).

    Parameters are rounded to float32 as the C struct holds them, and bias
    and penalties are applied in float32 arithmetic as the sampler does (to
    the logits, in place); the rest is float64."""
    f32 = np.float32
    temperature, top_p, min_p = float(f32(temperature)), float(f32(top_p)), float(f32(min_p))
    l = logits.astype(f32).copy()
    v = len(l)
    for i, b in bias:
        l[i] = l[i] + f32(min(100.0, max(-100.0, b)))
    counts = np.bincount(np.array(accept, dtype=np.int64), minlength=v) if accept else np.zeros(v, np.int64)
    seen = counts > 0
    seen[list(context)] = True
    r = f32(repetition)
    l = np.where(seen, np.where(l > 0, l / r, l * r), l).astype(f32)
    l = np.where(counts > 0, l - (f32(presence) + f32(frequency) * counts.astype(f32)), l).astype(f32)
    l = l.astype(np.float64)
    if allow is not None:
        allowed = np.zeros(v, bool)
        allowed[list(allow)] = True
        l[~allowed] = -np.inf
    probs = np.zeros(v)
    if temperature == 0:
        probs[int(np.argmax(l))] = 1.0  # argmax: the first (lowest) id among equals
        return probs, math.inf
    ids = np.arange(v)
    order = np.lexsort((ids, -l))  # logit descending, then id
    order = order[np.isfinite(l[order])]
    if top_k:
        order = order[:top_k]
    p = np.exp((l[order] - l[order[0]]) / temperature)
    p /= p.sum()
    margin = math.inf
    if top_p < 1.0:
        c = np.cumsum(p)
        j = int(np.searchsorted(c, top_p))  # first index with c[j] >= top_p
        j = min(j, len(p) - 1)
        margin = min(margin, abs(c[j] - top_p), abs(c[j - 1] - top_p) if j else math.inf)
        order, p = order[: j + 1], p[: j + 1] / c[j]
    if min_p > 0.0:
        ratio = p / p[0]
        margin = min(margin, float(np.abs(ratio - min_p).min()))
        keep = ratio >= min_p
        order, p = order[keep], p[keep] / p[keep].sum()
    probs[order] = p
    return probs, margin


# ---- fixtures --------------------------------------------------------------------


def vectors():
    rng = np.random.default_rng(20240601)
    normal = rng.normal(0.0, 2.0, 64).astype(np.float32)
    ranks = np.arange(1, 1001)
    zipf = (-1.1 * np.log(ranks) + rng.normal(0.0, 0.3, 1000)).astype(np.float32)
    zipf = zipf[rng.permutation(1000)] + np.float32(5.0)
    ties = (np.round(rng.normal(0.0, 1.5, 50) * 2) / 2).astype(np.float32)
    return {"normal64": normal, "zipf1000": zipf, "ties50": ties}


SETTINGS = {
    "t0.7": dict(temperature=0.7),
    "t1.3": dict(temperature=1.3),
    "top_k5": dict(top_k=5),
    "top_p0.9": dict(top_p=0.9),
    "min_p0.1": dict(min_p=0.1),
    "combined": dict(temperature=0.8, top_k=20, top_p=0.95, min_p=0.05),
}


def masked_setting(v):
    """A mask of every third token plus token 1, a +100 bias on a masked token
    (never drawn) and a +2 bias on an allowed one, repetition 1.3 over a
    context, presence / frequency over accepted tokens, and truncation."""
    allow = sorted(set(range(0, v, 3)) | {1})
    return dict(temperature=0.9, top_p=0.97, min_p=0.02, allow=allow, bias=((2, 100.0), (3, 2.0)),
                context=(0, 1, 6), accept=(3, 3, 9, 12), repetition=1.3, presence=0.4, frequency=0.3)


def args_for(s):
    a = []
    for key, flag in [("temperature", "--temperature"), ("top_k", "--top-k"), ("top_p", "--top-p"),
                      ("min_p", "--min-p"), ("repetition", "--repetition-penalty"),
                      ("presence", "--presence-penalty"), ("frequency", "--frequency-penalty")]:
        if key in s:
            a += [flag, repr(s[key])]
    for key, flag in [("allow", "--allow"), ("context", "--context"), ("accept", "--accept")]:
        if key in s:
            a += [flag, ",".join(map(str, s[key]))]
    for i, b in s.get("bias", ()):
        a += ["--bias", "%d:%r" % (i, b)]
    return a


def run_cli(cli, tmp_path, logits, s, *extra):
    f = tmp_path / "logits.f32"
    logits.astype("<f4").tofile(f)
    out = subprocess.run([cli, str(f), *args_for(s), *extra], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


CASES = [(vn, sn) for vn in ("normal64", "zipf1000", "ties50") for sn in list(SETTINGS) + ["masked"]]


@pytest.mark.parametrize("vname,sname", CASES, ids=["%s-%s" % c for c in CASES])
def test_distribution(cli, tmp_path, vname, sname):
    logits = vectors()[vname]
    s = masked_setting(len(logits)) if sname == "masked" else SETTINGS[sname]
    want, margin = target(logits, **s)
    assert margin > MARGIN, "fixture too close to a top-p / min-p boundary (%g)" % margin
    seed = 1000 + CASES.index((vname, sname))

    # The sampler's own distribution.
    got = np.zeros(len(logits))
    for line in run_cli(cli, tmp_path, logits, s, "--probs").split("\n"):
        if line:
            i, p = line.split()
            got[int(i)] = float(p)
    assert np.array_equal(got > 0, want > 0), "support differs: C %s, NumPy %s" % (
        np.flatnonzero(got), np.flatnonzero(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)

    # Draws.
    ids = np.array(run_cli(cli, tmp_path, logits, s, "--n", str(DRAWS), "--seed", str(seed)).split(), dtype=np.int64)
    assert len(ids) == DRAWS
    counts = np.bincount(ids, minlength=len(logits))
    outside = np.flatnonzero((counts > 0) & (want == 0))
    assert outside.size == 0, "drawn outside the NumPy support: %s" % outside
    if "allow" in s:
        assert counts[2] == 0  # masked, with a +100 bias
    support = want > 0
    p, dof = chi_square(counts[support], want[support], DRAWS)
    assert p >= ALPHA, "chi-square p = %.3g (dof %d)" % (p, dof)


def test_power(cli, tmp_path):
    """The same chi-square test rejects a slightly wrong target."""
    logits = vectors()["zipf1000"]
    for right, wrong in [(dict(temperature=0.7), dict(temperature=0.8)),
                         (dict(top_p=0.9), dict(top_p=0.8)),
                         (dict(top_k=5), dict(top_k=5, temperature=1.1))]:
        ids = np.array(run_cli(cli, tmp_path, logits, right, "--n", str(DRAWS), "--seed", "7").split(),
                       dtype=np.int64)
        counts = np.bincount(ids, minlength=len(logits))
        good, _ = target(logits, **right)
        bad, _ = target(logits, **wrong)
        assert chi_square(counts[good > 0], good[good > 0], DRAWS)[0] >= ALPHA
        # Against the wrong target: draws outside its support, or a tiny p.
        if (counts[bad == 0] > 0).any():
            continue
        p, _ = chi_square(counts[bad > 0], bad[bad > 0], DRAWS)
        assert p < 1e-6, (right, wrong, p)


def test_greedy_and_seed(cli, tmp_path):
    logits = vectors()["ties50"]
    ids = run_cli(cli, tmp_path, logits, dict(temperature=0.0), "--n", "50").split()
    assert set(ids) == {str(int(np.argmax(logits)))}
    a = run_cli(cli, tmp_path, logits, dict(temperature=1.0), "--n", "200", "--seed", "5")
    b = run_cli(cli, tmp_path, logits, dict(temperature=1.0), "--n", "200", "--seed", "5")
    c = run_cli(cli, tmp_path, logits, dict(temperature=1.0), "--n", "200", "--seed", "6")
    assert a == b and a != c


def test_invalid_parameter(cli, tmp_path):
    f = tmp_path / "logits.f32"
    vectors()["normal64"].astype("<f4").tofile(f)
    out = subprocess.run([cli, str(f), "--temperature", "2.5"], capture_output=True, text=True)
    assert out.returncode == 1 and "temperature" in out.stderr
    out = subprocess.run([cli, str(f), "--allow", "64"], capture_output=True, text=True)
    assert out.returncode == 1
