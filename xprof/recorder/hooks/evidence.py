"""Evidence of what a step is, beside the barrier: optimizer steps, ``Module.train``/``eval``,
backward passes, grad turned off; and the line a warning raised inside a hooked call is given.
"""

from __future__ import annotations

import os
import sys
import threading
from types import FrameType
from typing import Any

from xprof.recorder.core import Recorder
from xprof.recorder.hooks.patching import Patches, posing_as, user_frames_only


def install_optimizer_steps(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Count every ``optimizer.step()`` (a training step's evidence, whatever drives it).

    ``torch.optim``'s global post hook fires for every optimizer: a hand loop's, the HF
    Trainer's, ``GradScaler.step``'s, torch_xla's syncfree ones.
    """
    owner = rec.owner
    bump = rec.on_optimizer_step
    optimizers = rec.optimizers  # (--explain hashes their parameters, gradients and state)

    seen: set[int] = set()

    def post_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        if rec.active and threading.get_ident() == owner:
            bump()
            if optimizers is not None:
                optimizers.add(optimizer)
            if id(optimizer) not in seen:
                seen.add(id(optimizer))
                _describe(rec, optimizer)

    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(post_hook)
    patches.on_restore(handle.remove)
    rec.grad_enabled = torch.is_grad_enabled


def _describe(rec: Recorder, optimizer: Any) -> None:
    """An ``optimizer`` record, once per optimizer: its class and each group's learning rate
    and weight decay where they are Python numbers (the advice on a value that reached 0 or 1
    computes its example from them: ``1 - lr * weight_decay`` rounding to 1.0)."""
    try:
        groups = [{k: g[k] for k in ("lr", "weight_decay") if type(g.get(k)) in (int, float)}
                  for g in optimizer.param_groups[:8]]
        rec.mark("optimizer", cls=type(optimizer).__name__, groups=groups)
    except Exception as exc:
        rec.error("optimizer hook", exc)


_HOOKS_DIR = os.path.dirname(os.path.dirname(__file__))
"""The recorder's folder, which holds the hooks' own code (as their frames name it): a warning
located there came from inside a hooked call."""


def install_warning_location(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Give a warning raised inside a hooked call the line that called it.

    torch warns from C (``Converting a tensor with requires_grad=True to a scalar ...`` in
    ``float(loss)``), and Python gives a C warning the innermost Python frame's line: with
    the hooks on, the wrapper's (in ``xprof/recorder/hooks/``), which blames xprof for the
    user's call. Every warning Python shows or records goes through
    ``warnings._showwarnmsg`` (``warnings.warn`` and C's ``PyErr_WarnEx`` alike; a
    ``catch_warnings(record=True)`` block, pytest's among them, and a replaced
    ``showwarning`` are both reached from it), so the wrapped one puts such a warning back
    at the first frame outside xprof; every other warning passes through as it came.
    Where that private hook is missing, ``warnings.showwarning`` is wrapped instead (shown
    warnings only).
    """
    import warnings

    show_message = getattr(warnings, "_showwarnmsg", None)
    if callable(show_message):
        def _showwarnmsg(msg: Any, __original: Any = show_message) -> Any:
            if rec.active and str(getattr(msg, "filename", "")).startswith(_HOOKS_DIR):
                located = _caller_of_hook(sys._getframe(1))
                if located is not None:
                    msg.filename, msg.lineno, msg.line = located[0], located[1], None
            return __original(msg)

        patches.set(warnings, "_showwarnmsg", _showwarnmsg)
        return

    original = warnings.showwarning

    def showwarning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                    line: Any = None) -> Any:
        if rec.active and str(filename).startswith(_HOOKS_DIR):
            located = _caller_of_hook(sys._getframe(1))
            if located is not None:
                filename, lineno, line = located[0], located[1], None
        return original(message, category, filename, lineno, file, line)

    patches.set(warnings, "showwarning", showwarning)


def _caller_of_hook(frame: FrameType | None) -> tuple[str, int] | None:
    """File and line of the frame that called the hook whose wrapper is on ``frame``'s
    stack (None when there is none: never raises)."""
    try:
        f = frame
        while f is not None and not f.f_code.co_filename.startswith(_HOOKS_DIR):
            f = f.f_back  # up to the hook's frame the warning was given ...
        while f is not None and f.f_code.co_filename.startswith(_HOOKS_DIR):
            f = f.f_back  # ... and past it, to the caller's
        return (f.f_code.co_filename, f.f_lineno) if f is not None else None
    except Exception:
        return None


def install_phase_evidence(rec: Recorder, patches: Patches, torch: Any) -> None:
    """What tells an eval pass from training, whatever loop drives it: the mode the last
    ``Module.train()``/``eval()`` call set (``ev``; outermost call only, not the recursion
    into children) and the backward passes since the last barrier (``bw``, from
    ``torch.autograd.backward``, which ``Tensor.backward`` calls, and ``torch.autograd.grad``).

    Both fire a few times a step at most; neither reads a tensor.
    """
    owner = rec.owner
    module_type = torch.nn.Module
    original_train = module_type.train
    state = {"depth": 0}

    def train(self: Any, mode: bool = True) -> Any:
        try:
            if not rec.active or state["depth"] or threading.get_ident() != owner:
                return original_train(self, mode)
            state["depth"] = 1
            try:
                result = original_train(self, mode)
            finally:
                state["depth"] = 0
            rec.eval_mode = mode is False
            return result
        except BaseException as exc:
            user_frames_only(exc)
            raise

    patches.set(module_type, "train", posing_as(train, original_train, "train"))

    autograd = torch.autograd
    bump = rec.on_backward
    for attr in ("backward", "grad"):
        original = getattr(autograd, attr, None)
        if original is None:
            continue

        def passes(*args: Any, __original: Any = original, __locate: bool = attr == "backward",
                   **kwargs: Any) -> Any:
            try:
                if rec.active:
                    bump()
                    if rec.explain is not None and args:  # (--explain hashes the loss's graph too)
                        rec.explain.saw_backward(args[0])
                    if __locate and args and rec.fallback_sites.active:  # (a fallback's forward line)
                        rec.fallback_sites.on_backward(args[0])
                return __original(*args, **kwargs)
            except BaseException as exc:
                user_frames_only(exc)
                raise

        patches.set(autograd, attr, posing_as(passes, original, attr))

    # Grad turned off since the last barrier (``gd``): ``torch.no_grad()`` and
    # ``torch.inference_mode()`` entered, as a ``with`` or as a decorator. An eval loop's
    # forward under no_grad has its barrier (the next batch's) outside it.
    for cls in (getattr(torch, "no_grad", None), getattr(torch, "inference_mode", None)):
        enter = getattr(cls, "__enter__", None)
        if enter is None:
            continue

        def entered(self: Any, __enter: Any = enter) -> Any:
            try:
                if rec.active and getattr(self, "mode", True) is not False and threading.get_ident() == owner:
                    rec.grad_turned_off = True
                return __enter(self)
            except BaseException as exc:
                user_frames_only(exc)
                raise

        patches.set(cls, "__enter__", posing_as(entered, enter, "__enter__"))
