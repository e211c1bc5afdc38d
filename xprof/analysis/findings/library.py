"""Advice for a library call that reads values on the host, from the library's own line."""

from __future__ import annotations

import re
from typing import Any

from xprof.analysis.findings.common import short_code
from xprof.runfile import Site


def third_party(via: Any) -> bool:
    """``via`` is a function of an installed library, not torch's or torch_xla's own."""
    return isinstance(via, str) and via.split(".", 1)[0] not in ("torch", "torch_xla")



def library_advice(via: str, where: str, code: str, site: Site | None, does: str) -> str:
    """What to change about a library call that reads values on the host, from its own line:
    a keyword argument of the call that the line uses, a conversion to a number, or a check
    of the inputs (``..._validation``: libraries let you turn those off)."""
    lib_code = site.inner_at[2] if site is not None and site.inner_at is not None else ""
    arg = _argument_read_on(code, lib_code)
    inner = (site.inner or "") if site is not None else ""
    # a check of the inputs: the innermost function's name, or the reading line, says so
    checks = re.search(r"valid|check", f"{inner.rsplit('.', 1)[-1]} {lib_code}", re.IGNORECASE) is not None
    where_in = f"{inner.rsplit('.', 1)[-1]}, " if inner else ""
    option = next((said for pattern, said in LIBRARY_OPTIONS if pattern.search(inner)), None)
    if option is not None:
        return f"{via} (called from {where}) {does}. {option}"
    return (f"{via} (called from {where}) {does}. "
            + (f"The library's line that reads uses `{arg.split('=')[0]}`, which you pass as `{arg}`. "
               "Leaving it out may avoid the read but changes what the call computes; look instead for an "
               "option of the call that tells the library what it would otherwise check on the host (a flag "
               "such as is_causal=True or validate_args=False: the same results on valid inputs). " if arg else "")
            + (_number_advice(via, lib_code) if not arg and _TO_NUMBER.search(lib_code) else "")
            + (f"It happens in {where_in}a check of your inputs: libraries usually let you turn such checks "
               "off (validate_args=False in torchmetrics and torch.distributions: the same results on valid "
               "inputs; invalid ones are no longer caught). " if checks and not arg else "")
            + "Check whether it needs to run every step, or whether the library has an XLA-friendly option.")



def _number_advice(via: str, lib_code: str) -> str:
    """The library's line turns a tensor into a Python number: a size it works out from the data
    (``dim_size = int(index.max()) + 1`` in PyG's pooling) can be passed in; another value can
    come from a read made anyway, or be asked for less often where that changes nothing."""
    said = f"That line turns a tensor into a Python number (`{short_code(lib_code)}`)"
    target = _ASSIGNED.match(lib_code)
    if target is not None and _SIZE_NAME.search(target.group(1)):
        name = target.group(1)
        return (f"{said}: {name}, a size the library works out from the data when it is not given. If the "
                f"call takes it as an argument (named like {name}, size or num_*), pass the value you already "
                "know on the host (a batch's number of graphs, a fixed maximum): the read goes, and the "
                "results stay the same as long as the value is right. ")
    often = ("or call it less often (its patience then counts fewer calls, so the learning rate changes at "
             "other steps: a different training)" if _SCHEDULER.search(via) else
             "or call it less often where it only reports (a metric, a logger), not where its result is used")
    return f"{said}: pass it a value you read on the host anyway (at a logging step), {often}. "


_ASSIGNED = re.compile(r"\s*([A-Za-z_]\w*)\s*=(?!=)")
_SIZE_NAME = re.compile(r"size|num|count|len|max|dim|shape", re.IGNORECASE)
_SCHEDULER = re.compile(r"lr_scheduler|Scheduler|Plateau")


LIBRARY_OPTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    # transformers 5's mixture-of-experts layers (Mixtral, Qwen-MoE, OLMoE...): the "eager"
    # experts find each expert's tokens with nonzero()/torch.where(mask); "batched_mm" computes
    # each token's chosen experts with fixed shapes. Checked on torch_xla 2.9 with a 2-layer
    # Mixtral, 8 steps: 61 compiles and 344 executions -> 2 and 8; a 1-layer OLMoE, 6 steps: 19 and
    # 132 -> 2 and 6; the same losses both times; the default
    # "grouped_mm" fails on XLA (torch.histc of an int tensor).
    (re.compile(r"^transformers\.(?:integrations\.moe\.|models\.\w+\.modeling_\w+\.\w*Experts\.)"),
     "transformers lets you pick how its mixture-of-experts layers run their experts: load the model "
     "with experts_implementation=\"batched_mm\" (from_pretrained(..., experts_implementation="
     "\"batched_mm\"), or set config._experts_implementation before building it), which computes each "
     "token's chosen experts with fixed shapes, no value-dependent op: the same outputs (checked on "
     "torch_xla 2.9: a 2-layer Mixtral went from 61 compiles to 2, a 1-layer OLMoE from 19 to 2, with the "
     "same losses). The default "
     "\"grouped_mm\" does not run on torch_xla 2.9."),
)
"""Library functions (their innermost frame's qualified name) whose library offers a setting
that removes their host reads or value-dependent ops, with what it changes (checked)."""


_KWARG = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^,()]+)")



_NAME = re.compile(r"[A-Za-z_]\w*")



_TO_NUMBER = re.compile(r"\b(?:float|int)\(|\.item\(\)|\.tolist\(\)")



def _argument_read_on(code: str, lib_code: str) -> str | None:
    """The keyword argument (``name=value``) of the user's call whose name the library's
    reading line uses (``error_if_nonfinite=True`` and ``if error_if_nonfinite and (...)``)."""
    if "(" not in code or not lib_code:
        return None
    names = set(_NAME.findall(lib_code))
    for name, value in _KWARG.findall(code[code.index("("):]):
        if name in names:
            return f"{name}={value.strip()}"
    return None
