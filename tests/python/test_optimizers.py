"""Optimizers against hand-computed NumPy updates, schedules, gradient
clipping, state handling and compilation."""

import math
from functools import partial

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim
from fluxion.utils import tree_flatten, tree_map, tree_unflatten

RNG = np.random.default_rng(3)
STEPS = 3


def npa(x):
    return np.array(x)


def run(opt, p0, grads):
    """Apply ``grads`` (a list of NumPy arrays, one per step) to a single
    parameter; returns the parameter after each step."""
    params = {"w": mx.array(p0)}
    out = []
    for g in grads:
        params = opt.apply_gradients({"w": mx.array(g)}, params)
        out.append(npa(params["w"]))
    return out


def np_sgd(p, grads, lr, momentum=0.0, wd=0.0, dampening=0.0, nesterov=False):
    v = np.zeros_like(p)
    out = []
    for g in grads:
        g = g + wd * p
        if momentum > 0:
            v = momentum * v + (1 - dampening) * g
            upd = g + momentum * v if nesterov else v
        else:
            upd = g
        p = p - lr * upd
        out.append(p)
    return out


def np_adam(p, grads, lr, b1, b2, eps, bias_correction=False, wd=0.0):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    out = []
    for t, g in enumerate(grads, 1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if bias_correction:
            p = p - lr / (1 - b1**t) * m / (
                np.sqrt(v) / np.sqrt(1 - b2**t) + eps
            )
        else:
            p = p - lr * m / (np.sqrt(v) + eps)
        out.append(p)
    return out


def np_rmsprop(p, grads, lr, alpha, eps):
    v = np.zeros_like(p)
    out = []
    for g in grads:
        v = alpha * v + (1 - alpha) * g * g
        p = p - lr * g / (np.sqrt(v) + eps)
        out.append(p)
    return out


def np_adagrad(p, grads, lr, eps):
    v = np.zeros_like(p)
    out = []
    for g in grads:
        v = v + g * g
        p = p - lr * g / (np.sqrt(v) + eps)
        out.append(p)
    return out


def np_adadelta(p, grads, lr, rho, eps):
    v = np.zeros_like(p)
    u = np.zeros_like(p)
    out = []
    for g in grads:
        v = rho * v + (1 - rho) * g * g
        d = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * d * d
        p = p - lr * d
        out.append(p)
    return out


def np_adamax(p, grads, lr, b1, b2, eps):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    out = []
    for g in grads:
        m = b1 * m + (1 - b1) * g
        v = np.maximum(b2 * v, np.abs(g))
        p = p - lr * m / (v + eps)
        out.append(p)
    return out


def np_lion(p, grads, lr, b1, b2, wd):
    m = np.zeros_like(p)
    out = []
    for g in grads:
        c = b1 * m + (1 - b1) * g
        m = b2 * m + (1 - b2) * g
        p = p * (1 - lr * wd) - lr * np.sign(c)
        out.append(p)
    return out


P0 = RNG.normal(size=(3, 4))
GRADS = [RNG.normal(size=(3, 4)) for _ in range(STEPS)]

CASES = [
    ("sgd", lambda: optim.SGD(0.1), lambda: np_sgd(P0, GRADS, 0.1)),
    (
        "sgd-momentum",
        lambda: optim.SGD(0.1, momentum=0.9, weight_decay=0.01, dampening=0.1),
        lambda: np_sgd(P0, GRADS, 0.1, 0.9, 0.01, 0.1),
    ),
    (
        "sgd-nesterov",
        lambda: optim.SGD(0.05, momentum=0.8, nesterov=True),
        lambda: np_sgd(P0, GRADS, 0.05, 0.8, nesterov=True),
    ),
    (
        "rmsprop",
        lambda: optim.RMSprop(0.01, alpha=0.9, eps=1e-6),
        lambda: np_rmsprop(P0, GRADS, 0.01, 0.9, 1e-6),
    ),
    (
        "adagrad",
        lambda: optim.Adagrad(0.1),
        lambda: np_adagrad(P0, GRADS, 0.1, 1e-8),
    ),
    (
        "adadelta",
        lambda: optim.AdaDelta(1.0, rho=0.8),
        lambda: np_adadelta(P0, GRADS, 1.0, 0.8, 1e-6),
    ),
    (
        "adam",
        lambda: optim.Adam(0.01, betas=[0.8, 0.9]),
        lambda: np_adam(P0, GRADS, 0.01, 0.8, 0.9, 1e-8),
    ),
    (
        "adam-bias-corrected",
        lambda: optim.Adam(0.01, bias_correction=True),
        lambda: np_adam(P0, GRADS, 0.01, 0.9, 0.999, 1e-8, True),
    ),
    (
        "adamw",
        lambda: optim.AdamW(0.01, weight_decay=0.1),
        lambda: np_adam(P0, GRADS, 0.01, 0.9, 0.999, 1e-8, wd=0.1),
    ),
    (
        "adamax",
        lambda: optim.Adamax(0.02),
        lambda: np_adamax(P0, GRADS, 0.02, 0.9, 0.999, 1e-8),
    ),
    (
        "lion",
        lambda: optim.Lion(0.01, weight_decay=0.1),
        lambda: np_lion(P0, GRADS, 0.01, 0.9, 0.99, 0.1),
    ),
]


@pytest.mark.parametrize("name,make,ref", CASES, ids=[c[0] for c in CASES])
def test_update_matches_hand_computed_steps(name, make, ref):
    got = run(
        make(), P0.astype(np.float32), [g.astype(np.float32) for g in GRADS]
    )
    for t, (a, b) in enumerate(zip(got, ref())):
        np.testing.assert_allclose(
            a, b, rtol=2e-5, atol=2e-6, err_msg=f"step {t + 1}"
        )


@pytest.mark.skipif(
    pytest.importorskip("torch") is None, reason="needs PyTorch"
)
def test_adamw_bias_corrected_matches_torch():
    import torch

    p = torch.tensor(P0, dtype=torch.float32, requires_grad=True)
    topt = torch.optim.AdamW([p], lr=0.01, weight_decay=0.05)
    opt = optim.AdamW(0.01, weight_decay=0.05, bias_correction=True)
    params = {"w": mx.array(P0.astype(np.float32))}
    for g in GRADS:
        p.grad = torch.tensor(g, dtype=torch.float32)
        topt.step()
        params = opt.apply_gradients(
            {"w": mx.array(g.astype(np.float32))}, params
        )
    np.testing.assert_allclose(
        npa(params["w"]), p.detach().numpy(), rtol=1e-5, atol=1e-6
    )


def np_adafactor(p, grads, eps=(1e-30, 1e-3), clip=1.0, decay=-0.8):
    """Adafactor with relative steps and parameter scaling (the defaults),
    for a matrix parameter."""
    row = np.zeros(p.shape[0])
    col = np.zeros(p.shape[1])
    out = []
    for t, g in enumerate(grads, 1):
        rms = np.sqrt(np.mean(p * p))
        lr = max(eps[1], rms) * min(1e-2, 1 / math.sqrt(t))
        beta2 = 1 - t**decay
        u = g * g + eps[0]
        row = beta2 * row + (1 - beta2) * u.mean(1)
        col = beta2 * col + (1 - beta2) * u.mean(0)
        r = 1 / np.sqrt(row / row.mean())
        c = 1 / np.sqrt(col)
        upd = np.outer(r, c) * g
        upd = upd / max(1.0, np.sqrt(np.mean(upd * upd)) / clip)
        p = p - lr * upd
        out.append(p)
    return out


def test_adafactor_matches_hand_computed_steps():
    got = run(
        optim.Adafactor(),
        P0.astype(np.float32),
        [g.astype(np.float32) for g in GRADS],
    )
    for a, b in zip(got, np_adafactor(P0, GRADS)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # Vectors use the unfactored second moment; higher ranks factor the
    # last two axes per leading index.
    opt = optim.Adafactor(beta_1=0.9, weight_decay=0.1)
    params = {"v": mx.ones((5,)), "t": mx.ones((2, 3, 4), mx.float16)}
    opt.init(params)
    assert set(opt.state["v"]) == {"exp_avg_sq", "exp_avg"}
    assert opt.state["t"]["exp_avg_sq_row"].shape == (2, 3)
    assert opt.state["t"]["exp_avg_sq_col"].shape == (2, 4)
    out = opt.apply_gradients(tree_map(mx.ones_like, params), params)
    assert out["t"].dtype == mx.float16 and np.isfinite(npa(out["t"])).all()
    row, col = mx.array([[1.0, 4.0]]), mx.array([[9.0, 16.0, 25.0]])
    est = npa(optim.Adafactor._approximate_exp_moving_avg(row, col))
    np.testing.assert_allclose(
        est,
        (1 / np.sqrt(np.array([1, 4]) / 2.5))[None, :, None]
        * (1 / np.sqrt([9.0, 16, 25]))[None, None],
        rtol=1e-6,
    )


def test_muon_orthogonalizes_matrix_updates():
    opt = optim.Muon(
        0.1, momentum=0.0, weight_decay=0.0, nesterov=False, ns_steps=10
    )
    g = RNG.normal(size=(6, 4)).astype(np.float32)
    out = opt.apply_gradients(
        {"w": mx.array(g), "b": mx.ones((3,))},
        {"w": mx.zeros((6, 4)), "b": mx.zeros((3,))},
    )
    # The update is -lr * sqrt(rows / cols) * orth with orth nearly
    # semi-orthogonal (singular values near 1 after the quintic iteration).
    orth = -npa(out["w"]).astype(np.float64) / (0.1 * math.sqrt(6 / 4))
    s = np.linalg.svd(orth, compute_uv=False)
    assert np.all((s > 0.6) & (s < 1.25)), s
    # Same singular vectors as the gradient: U^T orth V is diagonal.
    U, _, Vt = np.linalg.svd(g, full_matrices=False)
    D = U.T @ orth @ Vt.T
    np.testing.assert_allclose(D - np.diag(np.diag(D)), 0, atol=0.05)
    np.testing.assert_allclose(np.sort(np.diag(D)), np.sort(s), rtol=0.02)
    # Vectors get the plain momentum update.
    np.testing.assert_allclose(npa(out["b"]), -0.1 * np.ones(3), rtol=1e-6)
    # Higher-rank parameters (conv kernels) keep their shape.
    conv = optim.Muon(0.1).apply_gradients(
        {"k": mx.ones((8, 3, 3, 2))}, {"k": mx.zeros((8, 3, 3, 2))}
    )
    assert conv["k"].shape == (8, 3, 3, 2)


def test_state_init_and_types():
    params = {
        "a": [mx.zeros((3,)), mx.zeros((1,), mx.float16)],
        "b": mx.zeros((2, 2)),
    }
    grads = tree_map(mx.ones_like, params)
    opt = optim.SGD(0.1, momentum=0.9)
    opt.init(params)
    assert all(
        mx.array_equal(s["v"], mx.zeros_like(p)).item()
        for p, s in zip(
            [params["a"][0], params["a"][1], params["b"]],
            [opt.state["a"][0], opt.state["a"][1], opt.state["b"]],
        )
    )
    out = opt.apply_gradients(grads, params)
    assert out["a"][1].dtype == mx.float16
    assert opt.state["step"].item() == 1
    # Every optimizer keeps parameter dtypes and shapes.
    for cls in (
        optim.SGD,
        optim.RMSprop,
        optim.Adagrad,
        optim.AdaDelta,
        optim.Adam,
        optim.AdamW,
        optim.Adamax,
        optim.Lion,
        optim.Adafactor,
        optim.Muon,
    ):
        new = cls(learning_rate=0.1).apply_gradients(grads, params)
        for (k, p), (_, q) in zip(tree_flatten(params), tree_flatten(new)):
            assert p.dtype == q.dtype and p.shape == q.shape, (cls.__name__, k)


def test_state_round_trip_through_flatten():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    opt = optim.Adam(0.01)
    x = mx.ones((4, 2))

    def loss(m):
        return m(x).sum()

    for _ in range(2):
        _, g = nn.value_and_grad(model, loss)(model)
        opt.update(model, g)
    saved = tree_flatten(opt.state)
    restored = optim.Adam(0.01)
    restored.state = tree_unflatten(saved)
    m2 = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    m2.update(model.parameters())
    _, g = nn.value_and_grad(model, loss)(model)
    opt.update(model, g)
    restored.update(m2, g)
    for (k, a), (_, b) in zip(
        tree_flatten(model.parameters()), tree_flatten(m2.parameters())
    ):
        np.testing.assert_array_equal(npa(a), npa(b), err_msg=k)
    assert restored.state["step"].item() == 3


def test_learning_rate_setter_and_schedule():
    opt = optim.SGD(0.5)
    assert opt.learning_rate.item() == 0.5
    opt.learning_rate = 0.25
    assert opt.learning_rate.item() == 0.25
    sched = optim.exponential_decay(1.0, 0.5)
    opt = optim.SGD(sched)
    params = {"w": mx.zeros((1,))}
    seen = []
    for _ in range(4):
        params = opt.apply_gradients({"w": mx.ones((1,))}, params)
        seen.append(opt.learning_rate.item())
    # The schedule is evaluated at the step count before each update.
    np.testing.assert_allclose(seen, [1, 0.5, 0.25, 0.125])
    np.testing.assert_allclose(npa(params["w"]), [-(1 + 0.5 + 0.25 + 0.125)])


def test_schedules():
    np.testing.assert_allclose(
        optim.exponential_decay(0.1, 0.9)(mx.array(5)).item(),
        0.1 * 0.9**5,
        rtol=1e-6,
    )
    sd = optim.step_decay(0.1, 0.5, 10)
    np.testing.assert_allclose(
        [float(sd(s)) for s in (0, 9, 10, 25)],
        [0.1, 0.1, 0.05, 0.025],
        rtol=1e-6,
    )
    cd = optim.cosine_decay(1.0, 100, end=0.1)
    for s in (0, 30, 100, 150):
        expected = 0.1 + 0.9 * 0.5 * (
            1 + math.cos(math.pi * min(s, 100) / 100)
        )
        np.testing.assert_allclose(
            cd(s).item(), expected, rtol=1e-6, atol=1e-7
        )
    ls = optim.linear_schedule(0.0, 1.0, 10)
    np.testing.assert_allclose(
        [ls(s).item() for s in (0, 5, 10, 20)], [0, 0.5, 1, 1]
    )
    with pytest.raises(ValueError):
        optim.linear_schedule(0.0, 1.0, 0)
    joined = optim.join_schedules(
        [ls, optim.exponential_decay(1.0, 0.5)], [10]
    )
    np.testing.assert_allclose(
        [joined(s).item() for s in (0, 5, 10, 11, 12)], [0, 0.5, 1, 0.5, 0.25]
    )
    with pytest.raises(ValueError):
        optim.join_schedules([ls, ls], [1, 2])
    with pytest.raises(ValueError):
        optim.join_schedules([], [])


def test_clip_grad_norm():
    grads = {"a": mx.array([3.0, 0.0]), "b": [mx.array([[4.0]])]}
    clipped, norm = optim.clip_grad_norm(grads, 1.0)
    assert norm.item() == 5.0
    np.testing.assert_allclose(npa(clipped["a"]), [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(npa(clipped["b"][0]), [[0.8]], rtol=1e-5)
    same, _ = optim.clip_grad_norm(grads, 10.0)
    np.testing.assert_array_equal(npa(same["a"]), [3.0, 0.0])
    with pytest.raises(ValueError):
        optim.clip_grad_norm(grads, -1.0)


def test_validation_errors():
    for cls in (optim.RMSprop, optim.Adagrad, optim.AdaDelta):
        with pytest.raises(ValueError, match=">0"):
            cls(0.1, eps=0.0)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(ValueError, match="filters"):
        optim.MultiOptimizer([optim.SGD(0.1), optim.Adam(0.1)], [])


def test_multi_optimizer_routes_parameters():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    sgd, adam = optim.SGD(0.1), optim.Adam(0.01)
    multi = optim.MultiOptimizer([sgd, adam], [lambda name, p: p.ndim == 2])
    before = tree_map(lambda p: npa(p), model.parameters())
    grads = tree_map(mx.ones_like, model.trainable_parameters())
    multi.update(model, grads)
    after = model.parameters()
    # Weights took the SGD step, biases Adam's first step (without bias
    # correction: lr * 0.1 g / sqrt(0.001 g^2)).
    np.testing.assert_allclose(
        npa(after["layers"][0]["weight"]),
        before["layers"][0]["weight"] - 0.1,
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        npa(after["layers"][2]["bias"]),
        before["layers"][2]["bias"] - 0.01 * 0.1 / math.sqrt(1e-3),
        rtol=1e-4,
    )
    assert "weight" not in tree_flatten(adam.state, destination={}).get(
        "layers.0", {}
    )
    assert len(multi.state["states"]) == 2
    multi.learning_rate = 0.5
    assert sgd.learning_rate.item() == 0.5 and adam.learning_rate.item() == 0.5
    with pytest.raises(ValueError):
        multi.state = {"states": [{}]}


def test_compiled_training_step_matches_eager():
    def make():
        mx.random.seed(5)
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

    x = mx.array(RNG.normal(size=(16, 4)).astype(np.float32))
    y = mx.array(RNG.normal(size=(16, 1)).astype(np.float32))

    def loss_fn(model, x, y):
        return nn.losses.mse_loss(model(x), y)

    results = []
    for compiled in (False, True):
        model = make()
        opt = optim.Adam(optim.cosine_decay(0.05, 10))
        state = [model.state, opt.state]

        def step(x, y):
            loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
            opt.update(model, grads)
            return loss

        if compiled:
            step = partial(mx.compile, inputs=state, outputs=state)(step)
        losses = []
        for _ in range(5):
            loss = step(x, y)
            mx.eval(state, loss)
            losses.append(loss.item())
        results.append(
            (losses, npa(model.layers[2].weight), opt.state["step"].item())
        )
    (l0, w0, s0), (l1, w1, s1) = results
    np.testing.assert_allclose(l0, l1, rtol=1e-5)
    np.testing.assert_allclose(w0, w1, rtol=1e-5, atol=1e-6)
    assert s0 == s1 == 5
    assert l0[-1] < l0[0]
