"""The Module base class: a dict of parameters and sub-modules.

A Module is a ``dict`` (as in MLX) whose items are its arrays, sub-modules
and lists/dicts of them; everything else (hyper-parameters, callables) is
an ordinary Python attribute. Attribute access reads the dict first, so
``layer.weight`` and ``layer["weight"]`` are the same array, and the
parameter tree of a model is simply its nested dict structure, which every
transformation (grad, compile, tree_map) understands.
"""

import pathlib
import textwrap

import fluxion.core as mx
from fluxion.utils import tree_flatten, tree_unflatten

__all__ = ["Module"]


def _unwrap(model, value_key, value, filter_fn, map_fn, is_leaf_fn):
    """One step of :meth:`Module.filter_and_map`: keys of nested dicts and
    lists are reported to ``filter_fn`` as dotted paths relative to the
    module that owns them ("weights.w1"), which is also how freeze() names
    them."""
    if is_leaf_fn(model, value_key, value):
        return map_fn(value)
    if isinstance(value, Module):
        return {
            k: _unwrap(value, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in value.items()
            if filter_fn(value, k, v)
        }
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = f"{value_key}.{k}"
            out[k] = (
                _unwrap(model, key, v, filter_fn, map_fn, is_leaf_fn)
                if filter_fn(model, key, v)
                else {}
            )
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            key = f"{value_key}.{i}"
            out.append(
                _unwrap(model, key, v, filter_fn, map_fn, is_leaf_fn)
                if filter_fn(model, key, v)
                else {}
            )
        return out
    raise RuntimeError(
        f"[Module] Unexpected leaf {type(value).__name__} at '{value_key}' "
        "while traversing the module"
    )


def _is_empty_dict(x):
    return isinstance(x, dict) and not isinstance(x, Module) and len(x) == 0


class Module(dict):
    """Base class for layers and models.

    Sub-classes call ``super().__init__()`` first, then assign arrays and
    sub-modules as attributes; those become the module's parameter tree.
    """

    def __init__(self):
        self._no_grad = set()
        self._training = True

    # -- attributes --------------------------------------------------------

    def __getattr__(self, key):
        # Only called when normal lookup fails: the dict holds parameters.
        if key in self:
            return self[key]
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {key!r}"
        )

    def __setattr__(self, key, value):
        if isinstance(value, (mx.array, dict, list, tuple)):
            # A stale plain attribute of the same name would shadow the
            # dict entry on lookup.
            if key in self.__dict__:
                del self.__dict__[key]
            self[key] = value
        else:
            if key in self:
                del self[key]
            super().__setattr__(key, value)

    def __delattr__(self, key):
        if key in self:
            del self[key]
        else:
            super().__delattr__(key)

    @property
    def training(self):
        """Whether the module is in training mode (see :meth:`train`)."""
        return self._training

    @property
    def state(self):
        """The module's state dict: the module itself. It holds every
        array (including non-trainable ones such as BatchNorm's running
        statistics), so ``mx.compile(..., inputs=model.state,
        outputs=model.state)`` captures the whole model."""
        return self

    # -- printing ----------------------------------------------------------

    def _extra_repr(self):
        return ""

    def __repr__(self):
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        text = f"{type(self).__name__}({self._extra_repr()}"
        for k, v in children:
            text += "\n" + textwrap.indent(f"({k}): {v!r}", prefix="  ")
        if children:
            text += "\n"
        return text + ")"

    # -- filters -----------------------------------------------------------

    @staticmethod
    def is_module(value):
        """Whether a value is a :class:`Module`.

        Args:
            value: The value.

        Returns:
            bool: ``isinstance(value, Module)``.
        """
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module, key, value):
        """Filter for :meth:`children`: containers (dicts and lists) that may hold modules.

        Args:
            module (Module): The module the value belongs to.
            key (str): Its name.
            value: The value.

        Returns:
            bool: Whether to descend into ``value``.
        """
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module, key, value):
        """Filter for :meth:`parameters`: arrays and containers with a public name.

        Args:
            module (Module): The module the value belongs to.
            key (str): Its name.
            value: The value.

        Returns:
            bool: Whether ``value`` is (or holds) parameters.
        """
        return isinstance(
            value, (dict, list, mx.array)
        ) and not key.startswith("_")

    @staticmethod
    def trainable_parameter_filter(module, key, value):
        """Filter for :meth:`trainable_parameters`: parameters that are not frozen.

        Args:
            module (Module): The module the value belongs to.
            key (str): Its name.
            value: The value.

        Returns:
            bool: Whether ``value`` is (or holds) trainable parameters.
        """
        return (
            Module.valid_parameter_filter(module, key, value)
            and key not in module._no_grad
        )

    # -- trees -------------------------------------------------------------

    def filter_and_map(self, filter_fn, map_fn=None, is_leaf_fn=None):
        """Walk the module tree keeping the entries ``filter_fn(module,
        key, value)`` accepts and mapping the leaves with ``map_fn``. The
        result has the module's structure (rejected list items become
        ``{}`` so indices stay aligned).

        Args:
            filter_fn (Callable): ``filter_fn(module, key, value)`` keeps an
                entry.
            map_fn (Callable, optional): Applied to each kept leaf.
            is_leaf_fn (Callable, optional): ``is_leaf_fn(module, key, value)``
                stops the descent at a value.

        Returns:
            dict: The kept (and mapped) entries, in the module's structure.
        """
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (
            lambda m, k, v: not isinstance(v, (Module, dict, list))
        )
        return {
            k: _unwrap(self, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in self.items()
            if filter_fn(self, k, v)
        }

    def parameters(self):
        """All arrays of the module and its children, as nested dicts and
        lists."""
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self):
        """The parameters that are not frozen."""
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self):
        """The direct sub-modules, in the structure that holds them."""
        return self.filter_and_map(
            self.valid_child_filter,
            is_leaf_fn=lambda m, k, v: isinstance(v, Module),
        )

    def leaf_modules(self):
        """The sub-modules that have no sub-modules themselves."""

        def is_leaf_module(m, k, v):
            return (
                isinstance(v, Module) and len(tree_flatten(v.children())) == 0
            )

        return self.filter_and_map(
            self.valid_child_filter, is_leaf_fn=is_leaf_module
        )

    def apply_to_modules(self, apply_fn):
        """Call ``apply_fn(path, module)`` on this module and every
        descendant, parents before children.

        Args:
            apply_fn (Callable): Called as ``apply_fn(path, module)``.

        Returns:
            Module: ``self``.
        """
        stack = [("", self)]
        while stack:
            prefix, mod = stack.pop()
            apply_fn(prefix, mod)
            prefix = "." + prefix if prefix else ""
            stack.extend(
                tree_flatten(
                    mod.children(), prefix=prefix, is_leaf=self.is_module
                )
            )
        return self

    def modules(self):
        """This module and all its descendants, as a list."""
        out = []
        self.apply_to_modules(lambda _, m: out.append(m))
        return out

    def named_modules(self):
        """``(path, module)`` for this module (path "") and every
        descendant."""
        out = []
        self.apply_to_modules(lambda k, m: out.append((k, m)))
        return out

    # -- updates -----------------------------------------------------------

    def update(self, parameters, strict=True):
        """Replace parameters with the arrays of ``parameters`` (a tree with
        the module's structure, possibly partial; an empty dict leaves an
        array in place, as the placeholders of :meth:`filter_and_map` do).

        With ``strict`` (the default) a key the module does not have, or a
        non-array value for an array, is a ValueError; otherwise those are
        skipped.

        Args:
            parameters (dict): The new arrays, in the module's structure.
            strict (bool, optional): Raise for entries that are not parameters of
                the module, or of another shape. Default ``True``.

        Returns:
            Module: ``self``.

        Example:
            >>> model.update(optimizer.apply_gradients(grads, model))
        """

        def check_leaf(new, path):
            if (
                strict
                and not isinstance(new, mx.array)
                and not _is_empty_dict(new)
            ):
                raise ValueError(
                    f"[Module.update] Received invalid type "
                    f"{type(new).__name__} for parameter '{path}'."
                )

        def apply(dst, params, path):
            if isinstance(params, dict):
                for k, new in params.items():
                    sub = f"{path}.{k}" if path else str(k)
                    if isinstance(dst, dict) and k in dst:
                        cur = dst[k]
                        if isinstance(cur, mx.array):
                            check_leaf(new, sub)
                            if not _is_empty_dict(new):
                                dst[k] = new
                        else:
                            apply(cur, new, sub)
                    elif strict:
                        raise ValueError(
                            "[Module.update] Module does not have parameter "
                            f'named "{sub}".'
                        )
            elif isinstance(params, list):
                if not isinstance(dst, (list, tuple)):
                    if strict:
                        raise ValueError(
                            f"[Module.update] Received a list for '{path}', "
                            f"which is a {type(dst).__name__}."
                        )
                    return
                for i, new in enumerate(params):
                    sub = f"{path}.{i}" if path else str(i)
                    if i >= len(dst):
                        if strict:
                            raise ValueError(
                                "[Module.update] Module does not have "
                                f'parameter named "{sub}".'
                            )
                        continue
                    cur = dst[i]
                    if isinstance(cur, mx.array):
                        check_leaf(new, sub)
                        if not _is_empty_dict(new):
                            dst[i] = new
                    else:
                        apply(cur, new, sub)
            elif strict:
                raise ValueError(
                    f"[Module.update] Received invalid type "
                    f"{type(params).__name__} for '{path}'."
                )

        apply(self, parameters, "")
        return self

    def update_modules(self, modules, strict=True):
        """Replace sub-modules with those of ``modules`` (a tree with the
        module's structure, possibly partial; ``{}`` leaves a place as it
        is). With ``strict``, names the module does not have and values
        that are not modules are ValueErrors.

        Args:
            modules (dict): The new modules, in the module's structure.
            strict (bool, optional): Raise for entries that are not sub-modules.
                Default ``True``.

        Returns:
            Module: ``self``.
        """

        def apply(dst, mods, path):
            if isinstance(mods, dict) and not isinstance(mods, Module):
                items = list(mods.items())
                for k, new in items:
                    sub = f"{path}.{k}" if path else str(k)
                    if isinstance(dst, dict) and k in dst:
                        cur = dst[k]
                        if isinstance(cur, Module) and isinstance(new, Module):
                            dst[k] = new
                        elif isinstance(cur, (dict, list)):
                            apply(cur, new, sub)
                        elif strict and not _is_empty_dict(new):
                            raise ValueError(
                                "[Module.update_modules] Received invalid "
                                "type "
                                f"{type(new).__name__} for '{sub}'."
                            )
                    elif strict:
                        raise ValueError(
                            "[Module.update_modules] Module does not have "
                            f'sub-module named "{sub}".'
                        )
            elif isinstance(mods, list) and isinstance(dst, list):
                for i, new in enumerate(mods):
                    sub = f"{path}.{i}" if path else str(i)
                    if i >= len(dst):
                        if strict:
                            raise ValueError(
                                f"[Module.update_modules] '{path}' has "
                                f"{len(dst)} "
                                f"entries, received {len(mods)}."
                            )
                        continue
                    cur = dst[i]
                    if isinstance(cur, Module) and isinstance(new, Module):
                        dst[i] = new
                    elif isinstance(cur, (dict, list)):
                        apply(cur, new, sub)
                    elif strict and not _is_empty_dict(new):
                        raise ValueError(
                            f"[Module.update_modules] Received invalid type "
                            f"{type(new).__name__} for '{sub}'."
                        )
            elif strict:
                raise ValueError(
                    f"[Module.update_modules] Received invalid type "
                    f"{type(mods).__name__} for '{path}'."
                )

        apply(self, modules, "")
        return self

    def apply(self, map_fn, filter_fn=None):
        """Replace every parameter ``p`` accepted by ``filter_fn`` (default:
        all parameters) with ``map_fn(p)``.

        Args:
            map_fn (Callable): ``map_fn(p)`` returns the new parameter.
            filter_fn (Callable, optional): Selects the parameters, as
                :meth:`filter_and_map`'s.

        Returns:
            Module: ``self``.
        """
        filter_fn = filter_fn or Module.valid_parameter_filter
        self.update(self.filter_and_map(filter_fn, map_fn))
        return self

    def set_dtype(
        self, dtype, predicate=lambda x: mx.issubdtype(x, mx.floating)
    ):
        """Cast the parameters whose dtype satisfies ``predicate`` (default:
        floating types; None: all) to ``dtype``.

        Args:
            dtype (Dtype): The new type.
            predicate (Callable, optional): ``predicate(dtype)`` selects the
                parameters to cast.
        """
        if predicate is None:

            def predicate(_):
                return True

        self.apply(lambda x: x.astype(dtype) if predicate(x.dtype) else x)

    # -- freezing ----------------------------------------------------------

    def _own_parameter_keys(self):
        """Dotted names of this module's own parameters (not those of its
        sub-modules)."""
        own = self.filter_and_map(
            lambda m, k, v: not isinstance(v, Module)
            and Module.valid_parameter_filter(m, k, v)
        )
        return [k for k, _ in tree_flatten(own)]

    def _freeze_scope(self, recurse):
        return self.modules() if recurse else [self]

    def _check_keys(self, keys, recurse, strict):
        if keys is None or not strict:
            return
        known = set()
        for m in self._freeze_scope(recurse):
            known.update(m._own_parameter_keys())
            known.update(k for k in m.keys())
        missing = [k for k in keys if k not in known]
        if missing:
            raise KeyError(
                f"[Module.freeze] Module has no parameters named {missing}"
            )

    def freeze(self, *, recurse=True, keys=None, strict=False):
        """Exclude parameters from :meth:`trainable_parameters` (all of them
        by default, or those named in ``keys``), in this module and, with
        ``recurse``, its descendants. With ``strict``, a key found in none
        of those modules is a KeyError.

        Args:
            recurse (bool, optional): Also freeze the sub-modules. Default
                ``True``.
            keys (str or list(str), optional): Names of the parameters to
                freeze; all when omitted.
            strict (bool, optional): Raise for keys that are not parameters.
                Default ``False``.

        Returns:
            Module: ``self``.
        """
        if isinstance(keys, str):
            keys = [keys]
        self._check_keys(keys, recurse, strict)
        for m in self._freeze_scope(recurse):
            m._no_grad.update(
                m._own_parameter_keys() if keys is None else keys
            )
        return self

    def unfreeze(self, *, recurse=True, keys=None, strict=False):
        """Undo :meth:`freeze` (for all parameters, or those in ``keys``).

        Args:
            recurse (bool, optional): Also unfreeze the sub-modules. Default
                ``True``.
            keys (str or list(str), optional): Names of the parameters; all when
                omitted.
            strict (bool, optional): Raise for keys that are not parameters.
                Default ``False``.

        Returns:
            Module: ``self``.
        """
        if isinstance(keys, str):
            keys = [keys]
        self._check_keys(keys, recurse, strict)
        for m in self._freeze_scope(recurse):
            if keys is None:
                m._no_grad.clear()
            else:
                m._no_grad.difference_update(keys)
        return self

    # -- modes -------------------------------------------------------------

    def _set_training_mode(self, mode):
        self._training = mode

    def train(self, mode=True):
        """Set training mode (Dropout active, BatchNorm updating its
        statistics) on this module and all descendants.

        Args:
            mode (bool, optional): Training (``True``) or evaluation mode.
                Default ``True``.

        Returns:
            Module: ``self``.
        """
        self.apply_to_modules(lambda _, m: m._set_training_mode(mode))
        return self

    def eval(self):
        """Set evaluation mode: ``train(False)``.

        Returns:
            Module: ``self``.
        """
        return self.train(False)

    # -- weights files -----------------------------------------------------

    def load_weights(self, file_or_weights, strict=True):
        """Load weights from a ``.npz`` or ``.safetensors`` file, or from a
        list of ``(name, array)`` pairs.

        With ``strict`` the names must be exactly the model's parameters,
        with the same shapes: otherwise a ValueError names the unexpected,
        missing or mis-shaped keys. Without it, names the model does not
        have are ignored.

        Args:
            file_or_weights (str or list(tuple(str, array))): A file, or
                ``(name, array)`` pairs with dotted names.
            strict (bool, optional): Require exactly the module's parameters, of
                their shapes. Default ``True``.

        Returns:
            Module: ``self``.
        """
        weights = file_or_weights
        if isinstance(weights, (str, pathlib.Path)):
            weights = list(mx.load(str(weights)).items())
        elif isinstance(weights, dict):
            weights = list(weights.items())
        else:
            weights = list(weights)

        current = dict(tree_flatten(self.parameters()))
        if strict:
            new = dict(weights)
            extras = sorted(new.keys() - current.keys())
            if extras:
                raise ValueError(
                    "[Module.load_weights] Received parameters not in model: "
                    f"{extras}."
                )
            missing = sorted(current.keys() - new.keys())
            if missing:
                raise ValueError(
                    f"[Module.load_weights] Missing parameters: {missing}."
                )
            for k, v in current.items():
                v_new = new[k]
                if not isinstance(v_new, mx.array):
                    raise ValueError(
                        "[Module.load_weights] Expected an array for "
                        "parameter "
                        f"'{k}' but received {type(v_new).__name__}."
                    )
                if tuple(v_new.shape) != tuple(v.shape):
                    raise ValueError(
                        "[Module.load_weights] Expected shape "
                        f"{tuple(v.shape)} "
                        f"but received shape {tuple(v_new.shape)} for "
                        f"parameter '{k}'."
                    )
        else:
            # Names the model lacks would make tree_unflatten build list
            # slots the module does not have.
            weights = [(k, v) for k, v in weights if k in current]
        if weights:
            self.update(tree_unflatten(weights), strict=False)
        return self

    def save_weights(self, file):
        """Save the parameters to ``file`` (``.npz`` or ``.safetensors``,
        chosen by the extension).

        Args:
            file (str): The file; ``.npz`` or ``.safetensors``.
        """
        file = str(file)
        params = dict(tree_flatten(self.parameters()))
        if file.endswith(".npz"):
            mx.savez(file, **params)
        elif file.endswith(".safetensors"):
            mx.save_safetensors(file, params)
        else:
            raise ValueError(
                "[Module.save_weights] Unsupported file extension for "
                f"'{file}'. "
                "Use '.npz' or '.safetensors'."
            )
