"""Optimizers (MLX's ``mlx.optimizers``).

An optimizer keeps its whole state in ``optimizer.state``, a tree of
arrays: the step count, the (possibly scheduled) hyper-parameters such as
``learning_rate``, and one dict per parameter with its moments. Because
the state is a plain tree it can be saved with ``tree_flatten``, restored
by assigning ``optimizer.state``, and captured by ``mx.compile``
(``inputs=[model.state, optimizer.state]``, ``outputs=...``) so that a
whole training step compiles into one graph.
"""


import fluxion.core as mx
from fluxion.utils import tree_flatten, tree_map, tree_merge, tree_unflatten

__all__ = [
    "Optimizer",
    "SGD",
    "RMSprop",
    "Adagrad",
    "AdaDelta",
    "Adam",
    "AdamW",
    "Adamax",
    "Lion",
    "Adafactor",
    "Muon",
    "MultiOptimizer",
    "clip_grad_norm",
]


class Optimizer:
    """Base class: sub-classes implement ``init_single(parameter, state)``
    (fill the per-parameter state dict) and ``apply_single(gradient,
    parameter, state)`` (return the updated parameter, updating the state
    dict in place).

    Args:
        schedulers (dict(str, Callable), optional): Hyper-parameter schedules
            by state name (sub-classes fill it through their arguments).
    """

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = dict(schedulers or {})

    def update(self, model, gradients):
        """Apply gradients to the parameters of a model, in place.

        Args:
            model (Module): The model (or anything with ``update``).
            gradients (dict): The gradients, in the model's structure.
        """
        model.update(self.apply_gradients(gradients, model))

    def init(self, parameters):
        """Create the per-parameter state.

        Entries already in the state (for example restored from a file) are kept;
        missing ones are created.

        Args:
            parameters (tree): The parameters.
        """

        def merge_structure(params, state):
            # Make `state` a tree with the structure of `params`, whose
            # leaves are the existing per-parameter dicts or new empty ones.
            if isinstance(params, (list, tuple)):
                state = list(state) if isinstance(state, (list, tuple)) else []
                for i in range(min(len(state), len(params))):
                    state[i] = merge_structure(params[i], state[i])
                state.extend(tree_map(lambda _: {}, params[len(state) :]))
                return (
                    type(params)(state)
                    if not hasattr(params, "_fields")
                    else (type(params)(*state))
                )
            if isinstance(params, dict):
                for k, v in params.items():
                    if k not in state:
                        state[k] = tree_map(lambda _: {}, v)
                    else:
                        state[k] = merge_structure(v, state[k])
                return state
            return state

        merge_structure(parameters, self._state)

        def init_leaf(p, s):
            if not s:
                self.init_single(p, s)
            return s

        tree_map(init_leaf, parameters, self._state)
        self._initialized = True

    def init_single(self, parameter, state):
        """Initialize the state of one parameter (a sub-class's hook).

        Args:
            parameter (array): The parameter.
            state (dict): Its empty state dict, filled in place (moments,
                accumulators, ...).
        """
        raise NotImplementedError

    def apply_gradients(self, gradients, parameters):
        """The parameters updated with gradients.

        Args:
            gradients (tree): The gradients.
            parameters (tree): The parameters: the structure of ``gradients``,
                possibly with more entries.

        Returns:
            tree: The updated parameters.
        """
        if not self._initialized:
            self.init(gradients)
        for name, schedule in self._schedulers.items():
            self.state[name] = schedule(self.step)
        self.state["step"] = self.step + 1
        return tree_map(self.apply_single, gradients, parameters, self.state)

    def apply_single(self, gradient, parameter, state):
        """Update one parameter (a sub-class's hook).

        Args:
            gradient (array): The parameter's gradient.
            parameter (array): The parameter.
            state (dict): Its state dict, updated in place.

        Returns:
            array: The updated parameter.
        """
        raise NotImplementedError

    @property
    def state(self):
        """The optimizer's state tree."""
        return self._state

    @state.setter
    def state(self, state):
        self._initialized = False
        self._state = state

    @property
    def step(self):
        """The number of updates applied so far (a ``uint64`` array).
        """
        return self.state["step"]

    @property
    def learning_rate(self):
        """The learning rate (an array; assign a float to change it).
        """
        return self.state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        self.state["learning_rate"] = mx.array(learning_rate)

    def _maybe_schedule(self, name, param):
        """Store a hyper-parameter in the state: a callable is a schedule
        evaluated at every step, anything else a constant array."""
        if callable(param):
            self._schedulers[name] = param
            value = param(self.step)
        else:
            value = mx.array(param)
        self.state[name] = value

    def _lr(self, gradient):
        return self.learning_rate.astype(gradient.dtype)


def _check_eps(name, eps):
    # The accumulators start at zero: eps = 0 turns a zero gradient into
    # 0 / 0 = NaN.
    if not eps > 0:
        raise ValueError(
            f"[{name}] Epsilon value should be >0, {eps} was provided instead"
        )


class SGD(Optimizer):
    r"""Stochastic gradient descent with optional momentum (PyTorch's
    formulation), dampening, Nesterov momentum and L2 weight decay:

    .. math::
        v_{t+1} = \mu v_t + (1 - \tau) g_t, \quad
        w_{t+1} = w_t - \lambda v_{t+1}

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        momentum (float, optional): Momentum :math:`\mu`. Default 0.
        weight_decay (float, optional): L2 penalty added to the gradient.
            Default 0.
        dampening (float, optional): Dampening :math:`\tau`. Default 0.
        nesterov (bool, optional): Nesterov momentum (needs a momentum and
            no dampening). Default ``False``.

    Example:
        >>> opt = optim.SGD(learning_rate=0.1, momentum=0.9)
        >>> opt.update(model, grads)
    """

    def __init__(
        self,
        learning_rate,
        momentum=0.0,
        weight_decay=0.0,
        dampening=0.0,
        nesterov=False,
    ):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                "[SGD] Nesterov momentum requires a momentum and zero "
                "dampening."
            )
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        lr = self._lr(gradient)
        if self.momentum <= 0:
            return parameter - lr * gradient
        v = self.momentum * state.get("v")
        if self.dampening > 0:
            v = v + (1 - self.dampening) * gradient
        else:
            v = v + gradient
        update = gradient + self.momentum * v if self.nesterov else v
        state["v"] = v
        return parameter - lr * update


class RMSprop(Optimizer):
    r"""RMSprop (Tieleman and Hinton):
    :math:`v_{t+1} = \alpha v_t + (1 - \alpha) g_t^2`,
    :math:`w_{t+1} = w_t - \lambda g_t / (\sqrt{v_{t+1}} + \epsilon)`.

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        alpha (float, optional): Smoothing :math:`\alpha`. Default 0.99.
        eps (float, optional): :math:`\epsilon`, positive. Default 1e-8.
    """

    def __init__(self, learning_rate, alpha=0.99, eps=1e-8):
        super().__init__()
        _check_eps("RMSprop", eps)
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha = alpha
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self._lr(gradient)
        v = self.alpha * state["v"] + (1 - self.alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class Adagrad(Optimizer):
    r"""Adagrad (Duchi et al.): :math:`v_{t+1} = v_t + g_t^2`,
    :math:`w_{t+1} = w_t - \lambda g_t / (\sqrt{v_{t+1}} + \epsilon)`.

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        eps (float, optional): :math:`\epsilon`, positive. Default 1e-8.
    """

    def __init__(self, learning_rate, eps=1e-8):
        super().__init__()
        _check_eps("Adagrad", eps)
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self._lr(gradient)
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    r"""AdaDelta (Zeiler): running averages of squared gradients ``v`` and
    squared updates ``u``; the step is
    :math:`\sqrt{u + \epsilon} / \sqrt{v + \epsilon} \, g`, scaled by the
    learning rate.

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        rho (float, optional): Smoothing of the averages. Default 0.9.
        eps (float, optional): :math:`\epsilon`, positive. Default 1e-6.
    """

    def __init__(self, learning_rate, rho=0.9, eps=1e-6):
        super().__init__()
        _check_eps("AdaDelta", eps)
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho = rho
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)
        state["u"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self._lr(gradient)
        rho, eps = self.rho, self.eps
        v = rho * state["v"] + (1 - rho) * mx.square(gradient)
        d = mx.sqrt(state["u"] + eps) / mx.sqrt(v + eps) * gradient
        state["u"] = rho * state["u"] + (1 - rho) * mx.square(d)
        state["v"] = v
        return parameter - lr * d


class Adam(Optimizer):
    r"""Adam (Kingma and Ba). Without ``bias_correction`` (MLX's default)
    the step is :math:`\lambda m / (\sqrt{v} + \epsilon)`; with it, the
    moments are divided by :math:`1 - \beta^t` as in the paper and
    PyTorch.

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        betas (tuple(float, float), optional): Smoothing of the first and
            second moments. Default ``(0.9, 0.999)``.
        eps (float, optional): :math:`\epsilon`. Default 1e-8.
        bias_correction (bool, optional): Divide the moments by
            :math:`1 - \beta^t`. Default ``False``.

    Example:
        >>> opt = optim.Adam(learning_rate=1e-3)
        >>> loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        >>> opt.update(model, grads)
    """

    def __init__(
        self,
        learning_rate,
        betas=(0.9, 0.999),
        eps=1e-8,
        bias_correction=False,
    ):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps
        self.bias_correction = bias_correction

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self._lr(gradient)
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = b2 * state["v"] + (1 - b2) * mx.square(gradient)
        state["m"], state["v"] = m, v
        if self.bias_correction:
            step = self.step
            c1 = (lr / (1 - b1**step)).astype(gradient.dtype)
            c2 = mx.rsqrt(1 - b2**step).astype(gradient.dtype)
            return parameter - c1 * m / (mx.sqrt(v) * c2 + self.eps)
        return parameter - lr * m / (mx.sqrt(v) + self.eps)


class AdamW(Adam):
    r"""Adam with decoupled weight decay (Loshchilov and Hutter): the
    parameter is first shrunk by :math:`1 - \lambda \cdot
    \text{weight\_decay}`.

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        betas (tuple(float, float), optional): Smoothing of the moments.
            Default ``(0.9, 0.999)``.
        eps (float, optional): :math:`\epsilon`. Default 1e-8.
        weight_decay (float, optional): Decoupled decay. Default 0.01.
        bias_correction (bool, optional): As in :class:`Adam`. Default
            ``False``.
    """

    def __init__(
        self,
        learning_rate,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.01,
        bias_correction=False,
    ):
        super().__init__(learning_rate, betas, eps, bias_correction)
        self.weight_decay = weight_decay

    def apply_single(self, gradient, parameter, state):
        lr = self._lr(gradient)
        return super().apply_single(
            gradient, parameter * (1 - lr * self.weight_decay), state
        )


class Adamax(Adam):
    r"""Adamax (the infinity-norm Adam): :math:`v = \max(\beta_2 v, |g|)`,
    step :math:`\lambda m / (v + \epsilon)`.

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        betas (tuple(float, float), optional): Smoothing of the moments.
            Default ``(0.9, 0.999)``.
        eps (float, optional): :math:`\epsilon`. Default 1e-8.
    """

    def __init__(self, learning_rate, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(learning_rate, betas, eps)
        if not 0.0 <= eps:
            raise ValueError(
                f"[Adamax] Epsilon value should be >=0, {eps} was provided "
                "instead"
            )

    def apply_single(self, gradient, parameter, state):
        lr = self._lr(gradient)
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"], state["v"] = m, v
        return parameter - lr * m / (v + self.eps)


class Lion(Optimizer):
    r"""Lion (Chen et al.): the step is :math:`\lambda
    \operatorname{sign}(\beta_1 m + (1 - \beta_1) g)`, then
    :math:`m \leftarrow \beta_2 m + (1 - \beta_2) g`; optional decoupled
    weight decay.

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        betas (tuple(float, float), optional): :math:`\beta_1, \beta_2`.
            Default ``(0.9, 0.99)``.
        weight_decay (float, optional): Decoupled decay. Default 0.
    """

    def __init__(self, learning_rate, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.weight_decay = weight_decay

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self._lr(gradient)
        b1, b2 = self.betas
        m = state["m"]
        c = b1 * m + (1 - b1) * gradient
        state["m"] = b2 * m + (1 - b2) * gradient
        if self.weight_decay > 0:
            parameter = (1 - lr * self.weight_decay) * parameter
        return parameter - lr * mx.sign(c)


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer and Stern): second moments of parameters with
    two or more dimensions are kept factored as row and column averages
    over the last two axes; updates are clipped by their RMS and, with
    ``relative_step`` (default), the step size is
    :math:`\min(10^{-2}, 1/\sqrt{t})` times the parameter's RMS.

    Args:
        learning_rate (float or Callable, optional): The step size; with
            ``relative_step`` and ``None``, the relative step is used.
        eps (tuple(float, float), optional): Regularizers of the second
            moment and of the parameter scale. Default ``(1e-30, 1e-3)``.
        clip_threshold (float, optional): RMS threshold of the update.
            Default 1.
        decay_rate (float, optional): Exponent of the second-moment decay.
            Default -0.8.
        beta_1 (float, optional): First-moment smoothing; none when
            ``None``.
        weight_decay (float, optional): Decay. Default 0.
        scale_parameter (bool, optional): Scale the step by the parameter's
            RMS. Default ``True``.
        relative_step (bool, optional): Use the relative step size. Default
            ``True``.
        warmup_init (bool, optional): Warm the relative step up. Default
            ``False``.
    """

    def __init__(
        self,
        learning_rate=None,
        eps=(1e-30, 1e-3),
        clip_threshold=1.0,
        decay_rate=-0.8,
        beta_1=None,
        weight_decay=0.0,
        scale_parameter=True,
        relative_step=True,
        warmup_init=False,
    ):
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter, state):
        if parameter.ndim >= 2:
            shape, dtype = parameter.shape, parameter.dtype
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], dtype=dtype)
            state["exp_avg_sq_col"] = mx.zeros(
                shape[:-2] + shape[-1:], dtype=dtype
            )
        else:
            state["exp_avg_sq"] = mx.zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = mx.zeros_like(parameter)

    @staticmethod
    def _compute_rms(inputs):
        return mx.sqrt(mx.mean(mx.square(inputs)))

    def _compute_learning_rate(self, step, parameter_rms):
        if self.relative_step:
            min_step = 1e-6 * step if self.warmup_init else 1e-2
            relative_step_size = mx.minimum(min_step, mx.rsqrt(step))
        else:
            relative_step_size = self.learning_rate
        relative_step_size = relative_step_size.astype(parameter_rms.dtype)
        parameter_scale = 1.0
        if self.scale_parameter:
            parameter_scale = mx.maximum(self.eps[1], parameter_rms)
        return parameter_scale * relative_step_size

    @staticmethod
    def _approximate_exp_moving_avg(exp_avg_sq_row, exp_avg_sq_col):
        """The inverse square root of the factored second moment: the
        outer product of the normalised row factor and the column factor,
        per leading (batch) index."""
        r_factor = mx.rsqrt(
            exp_avg_sq_row / mx.mean(exp_avg_sq_row, axis=-1, keepdims=True)
        )
        c_factor = mx.rsqrt(exp_avg_sq_col)
        return r_factor[..., :, None] * c_factor[..., None, :]

    def apply_single(self, gradient, parameter, state):
        factored = gradient.ndim >= 2
        step = self.step.astype(mx.float32)
        parameter_rms = self._compute_rms(parameter)
        learning_rate = self._compute_learning_rate(step, parameter_rms)
        beta_2 = 1.0 - (step**self.decay_rate).astype(parameter_rms.dtype)
        update = mx.square(gradient) + self.eps[0]
        if factored:
            row = beta_2 * state["exp_avg_sq_row"] + (1 - beta_2) * mx.mean(
                update, axis=-1
            )
            col = beta_2 * state["exp_avg_sq_col"] + (1 - beta_2) * mx.mean(
                update, axis=-2
            )
            state["exp_avg_sq_row"], state["exp_avg_sq_col"] = row, col
            update = self._approximate_exp_moving_avg(row, col) * gradient
        else:
            avg = beta_2 * state["exp_avg_sq"] + (1 - beta_2) * update
            state["exp_avg_sq"] = avg
            update = mx.rsqrt(avg) * gradient
        update = update / mx.maximum(
            1.0, self._compute_rms(update) / self.clip_threshold
        )
        update = learning_rate * update
        if self.beta_1 is not None:
            avg = self.beta_1 * state["exp_avg"] + (1 - self.beta_1) * update
            state["exp_avg"] = avg
            update = avg
        if self.weight_decay != 0:
            parameter = parameter + parameter * (
                -self.weight_decay * learning_rate
            )
        return (parameter - update).astype(parameter.dtype)


class Muon(Optimizer):
    """Muon (MomentUm Orthogonalized by Newton-schulz, Jordan et al.):
    SGD momentum whose update, for matrices (and higher-rank parameters
    flattened to ``[shape[0], -1]``), is replaced by its nearest
    semi-orthogonal matrix, found with ``ns_steps`` quintic Newton-Schulz
    iterations in bfloat16. Vectors get the plain momentum update.

    Args:
        learning_rate (float or Callable): The step size, or a schedule of the step count.
        momentum (float, optional): Momentum. Default 0.95.
        weight_decay (float, optional): Decoupled decay. Default 0.01.
        nesterov (bool, optional): Nesterov momentum. Default ``True``.
        ns_steps (int, optional): Newton-Schulz iterations. Default 5.
    """

    def __init__(
        self,
        learning_rate,
        momentum=0.95,
        weight_decay=0.01,
        nesterov=True,
        ns_steps=5,
    ):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    @staticmethod
    def _zeropower_via_newtonschulz5(X, steps):
        # Coefficients chosen (by Jordan et al.) to maximise the slope at
        # zero while keeping the iteration within [0.7, 1.2].
        a, b, c = 3.4445, -4.7750, 2.0315
        X = X.astype(mx.bfloat16)
        transpose = X.shape[-2] > X.shape[-1]
        if transpose:
            X = X.T
        X = X / (
            mx.sqrt(mx.sum(mx.square(X.astype(mx.float32)))).astype(X.dtype)
            + 1e-7
        )
        for _ in range(steps):
            # X <- a X + (b A + c A^2) X with A = X X^T
            A = X @ X.T
            B = mx.addmm(A, A, A, alpha=c, beta=b)
            X = mx.addmm(X, B, X, alpha=1.0, beta=a)
        return X.T if transpose else X

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        v = self.momentum * state["v"] + (1 - self.momentum) * gradient
        state["v"] = v
        if self.nesterov:
            update = gradient * (1 - self.momentum) + v * self.momentum
        else:
            update = v
        lr = self._lr(gradient)
        if update.ndim >= 2:
            shape = update.shape
            if update.ndim > 2:
                update = update.reshape(shape[0], -1)
            update = self._zeropower_via_newtonschulz5(update, self.ns_steps)
            lr = lr * max(1, update.shape[-2] / update.shape[-1]) ** 0.5
            update = update.reshape(shape)
        return parameter - lr * update.astype(gradient.dtype)


class MultiOptimizer(Optimizer):
    """Several optimizers, each for the parameters selected by a filter
    ``filter(path, parameter) -> bool``: parameter ``p`` goes to the first
    optimizer whose filter accepts it, the last optimizer takes the rest
    (so ``len(filters) == len(optimizers) - 1``).

    Args:
        optimizers (list(Optimizer)): The optimizers.
        filters (list(Callable), optional): ``len(optimizers) - 1`` filters.
    """

    def __init__(self, optimizers, filters=()):
        super().__init__()
        self._state = {}
        filters = list(filters)
        if len(filters) != len(optimizers) - 1:
            raise ValueError(
                f"[MultiOptimizer] Given {len(filters)} filters but "
                f"{len(optimizers) - 1} needed."
            )
        self.optimizers = list(optimizers)
        self.filters = filters + [lambda *args, **kwargs: True]

    def _split_dictionary(self, gradients):
        if len(self.optimizers) == 1:
            return [gradients]
        parts = [[] for _ in self.optimizers]
        for k, g in tree_flatten(gradients):
            for i, fn in enumerate(self.filters):
                if fn(k, g):
                    parts[i].append((k, g))
                    break
        return [tree_unflatten(p) for p in parts]

    def init(self, parameters):
        for o, p in zip(self.optimizers, self._split_dictionary(parameters)):
            o.init(p)

    def apply_gradients(self, gradients, parameters):
        tree = {}
        for o, g in zip(self.optimizers, self._split_dictionary(gradients)):
            tree = tree_merge(tree, o.apply_gradients(g, parameters))
        return tree

    @property
    def state(self):
        return {"states": [o.state for o in self.optimizers]}

    @state.setter
    def state(self, state):
        if "states" not in state or len(state["states"]) != len(
            self.optimizers
        ):
            raise ValueError("[MultiOptimizer] Invalid state provided")
        for o, s in zip(self.optimizers, state["states"]):
            o.state = s

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        for o in self.optimizers:
            o.learning_rate = learning_rate


def clip_grad_norm(grads, max_norm):
    """Scale gradients so that their global L2 norm is at most ``max_norm``.

    Args:
        grads (tree): The gradients (a tree of arrays).
        max_norm (float): The largest norm allowed.

    Returns:
        tuple: ``(clipped_grads, total_norm)``, the norm before clipping.

    Example:
        >>> grads, norm = optim.clip_grad_norm(grads, max_norm=1.0)
    """
    if max_norm < 0:
        raise ValueError(
            f"[clip_grad_norm] max_norm must be non-negative, got {max_norm}"
        )
    norm_squared = 0.0
    for _, g in tree_flatten(grads):
        norm_squared = norm_squared + mx.sum(mx.square(g))
    total_norm = mx.sqrt(norm_squared)
    normalizer = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)
    return tree_map(lambda g: g * normalizer, grads), total_norm
