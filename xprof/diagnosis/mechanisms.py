"""Library mechanisms: one finding per mechanism, not one per user line or read method.

A read or a compiling barrier that happened inside an installed library carries the
library functions it went through (the site's ``chain``, innermost first, and ``via``, the
outermost). A few mechanisms are known by the function that drives them, with what the
library offers to avoid the cost; any other library function groups its own reads (the
innermost library function at the same user line is one mechanism).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xprof.diagnosis.evidence import is_own_barrier_call
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES
from xprof.runfile import Site


@dataclass(frozen=True)
class Mechanism:
    key: str
    kind: str
    what: str
    advice: str
    evaluates: bool = False
    """It runs eval passes: every compile of an eval pass that went through it is its own."""


_HF_LOGGING = Mechanism(
    key="lib:hf_trainer_logging", kind="hf_trainer_logging",
    what="The Trainer's logging",
    advice=(
        "transformers.Trainer reads the running loss (and the grad norm) on the host at every "
        "logging step, in Trainer._maybe_log_save_evaluate: on XLA it syncs, gathers the loss "
        "with xm.mesh_reduce and compiles a small graph for it. Raise TrainingArguments."
        "logging_steps (logging_strategy=\"steps\") so it happens rarely; keep "
        "include_num_input_tokens_seen off and skip grad-norm logging if you do not need it "
        "(max_grad_norm=0 stops the norm read but also stops clipping: a different training)."),
)

_HF_EVAL = Mechanism(
    key="lib:hf_trainer_eval", kind="hf_trainer_eval", what="The Trainer's evaluation",
    advice=(
        "transformers.Trainer's evaluation (eval_strategy / eval_steps) runs forward-only graphs "
        "of its own, with its own batch shapes, and gathers predictions on the host. Its graphs "
        "compile once per eval shape, and, unless eval_accumulation_steps is set, once per eval "
        "step: it concatenates each batch's predictions on the device, a longer tensor each step "
        "(eval_accumulation_steps=1 moves them to the host every step: 13 -> 8 graphs on a "
        "3-batch eval set, 14 -> 8 on another, though that one saved no time: its host reads "
        "doubled). Keep eval batches at one fixed shape (pad eval data to a fixed "
        "max_length; dataloader_drop_last=True also works but leaves the last partial batch out of "
        "training and the metric) and evaluate less often (larger eval_steps)."),
    evaluates=True,
)

_HF_CHECKPOINT = Mechanism(
    key="lib:hf_trainer_checkpoint", kind="hf_trainer_checkpoint", what="The Trainer's checkpointing",
    advice=(
        "transformers.Trainer saves a checkpoint every save_steps (save_strategy=\"steps\"): on XLA "
        "it gathers the weights and the optimizer state to the host (xm.save), which runs the "
        "pending graph and copies every tensor. Expected when rare; raise TrainingArguments."
        "save_steps (or save_strategy=\"epoch\") if it shows in step time."),
)

_HF_GENERATE = Mechanism(
    key="lib:hf_generate", kind="hf_generate", what="model.generate()",
    advice=(
        "generate() decodes a token at a time and checks its stopping criteria on the host after "
        "each one (unfinished_sequences.max() == 0, torch.isin for the end-of-sequence token), so "
        "every token is a read that runs the pending graph; with a cache that grows a token a "
        "step, each of those graphs is new. Where the model supports it, a static cache "
        "(generate(..., cache_implementation=\"static\")) with prompts padded to a few lengths "
        "lets the token graphs repeat from the cache. In a Seq2SeqTrainer, evaluate on the loss "
        "during training (predict_with_generate=False) and generate once at the end, or cap "
        "generation_max_length."),
)

# Lightning (checked on lightning 2.6.6 with its XLA strategy, torch_xla 2.9 on the CPU).
_PL = "lightning.pytorch.trainer.connectors.logger_connector.logger_connector._LoggerConnector."
_PL_PROG_BAR_METRICS = Mechanism(
    key="lib:pl_prog_bar_metrics", kind="pl_prog_bar_metrics", what="Lightning's progress-bar metrics",
    advice=(
        "Lightning turns every value logged with self.log(..., prog_bar=True) into a Python number "
        "(.item()) at the end of every batch (_LoggerConnector.on_batch_end), shown or not: "
        "Trainer(enable_progress_bar=False) does not stop it. On XLA that is a host read every step "
        "(before the step's barrier it runs the graph early and can compile it again: "
        "Lightning-AI/pytorch-lightning#15743). Log per-step tensors with prog_bar=False (the logger "
        "still gets them every log_every_n_steps), or with on_step=False, on_epoch=True."),
)
_PL_PROGRESS_BAR = Mechanism(
    key="lib:pl_progress_bar", kind="pl_progress_bar", what="Lightning's progress bar",
    advice=(
        "Lightning's progress bar reads its metrics (Trainer.progress_bar_metrics, each value "
        "logged with prog_bar=True turned into a number) every time it refreshes: on XLA a host read "
        "per refresh. Refresh less often (TQDMProgressBar(refresh_rate=N) or "
        "RichProgressBar(refresh_rate=N) in callbacks), turn the bar off "
        "(Trainer(enable_progress_bar=False)), or log those values with prog_bar=False."),
)
_PL_LOGGER = Mechanism(
    key="lib:pl_logger", kind="pl_logger", what="Lightning's logger",
    advice=(
        "Lightning hands the logged values to its logger as Python numbers every log_every_n_steps "
        "training steps (_LoggerConnector.log_metrics): on XLA a host read for each value at those "
        "steps. Raise Trainer(log_every_n_steps=...) (50 by default) so it happens rarely, or log "
        "fewer values on_step."),
)

def _causal_check(module: str, mask: str, flag: str, key: str) -> Mechanism:
    return Mechanism(
        key=key, kind="causal_mask_check", what=f"nn.{module}'s causal-mask check",
        advice=(
            f"Given {mask} without {flag}, nn.{module} compares the mask with a causal one on the host "
            "every forward (torch.nn.modules.transformer._detect_is_causal_mask): a host read and one "
            "more execution a step. When the mask you pass is the causal one (nn.Transformer."
            f"generate_square_subsequent_mask), also pass {flag}: the same mask and the same "
            f"outputs, and the check is skipped. Dropping {mask} instead would let tokens attend to "
            "later ones: a different model."))


_CAUSAL_ENCODER = _causal_check("TransformerEncoder", "mask=", "is_causal=True", "lib:torch_causal_mask_check")
_CAUSAL_BY_CALLER: tuple[tuple[str, Mechanism], ...] = (
    # the module the user called owns the check, and its flag is the fix (torch 2.9's
    # TransformerDecoder checks tgt_mask; nn.Transformer passes tgt_is_causal on to it)
    ("torch.nn.modules.transformer.TransformerDecoder.", _causal_check(
        "TransformerDecoder", "tgt_mask=", "tgt_is_causal=True", "lib:torch_causal_mask_check_decoder")),
    ("torch.nn.modules.transformer.Transformer.", _causal_check(
        "Transformer", "tgt_mask=", "tgt_is_causal=True", "lib:torch_causal_mask_check_transformer")),
)
"""The causal-mask check's owner, by the library call the user made (its ``via``)."""


_KNOWN: tuple[tuple[str, Mechanism], ...] = (
    # (before the Trainer's evaluation: a site's innermost known function names it, and
    # predict_with_generate runs generate() inside the evaluation loop)
    ("transformers.generation.utils.GenerationMixin.generate", _HF_GENERATE),
    ("transformers.trainer.Trainer.evaluation_loop", _HF_EVAL),
    ("transformers.trainer.Trainer.prediction_loop", _HF_EVAL),
    ("transformers.trainer.Trainer.evaluate", _HF_EVAL),
    ("transformers.trainer.Trainer._save_checkpoint", _HF_CHECKPOINT),
    ("transformers.trainer.Trainer.save_model", _HF_CHECKPOINT),
    ("transformers.integrations.tpu.save_tpu_checkpoint", _HF_CHECKPOINT),
    # _ignore_bidirectional_mask_sdpa (encoders: BERT) and _ignore_causal_mask_sdpa (decoders).
    ("transformers.masking_utils._ignore_", Mechanism(
        key="lib:hf_sdpa_mask_check", kind="hf_mask_check", what="The model's attention-mask check",
        advice=(
            "transformers checks padding_mask.all() in every forward (masking_utils."
            "_ignore_causal_mask_sdpa / _ignore_bidirectional_mask_sdpa) to skip building the "
            "attention mask: on XLA that is "
            "one small host read per step. transformers offers no switch for it (the eager "
            "attention path checks too); fixed-length padding keeps its graph cached, and "
            "batches without padding can be passed without attention_mask."))),
    ("transformers.trainer.Trainer._maybe_log_save_evaluate", _HF_LOGGING),
    ("torch.nn.modules.transformer._detect_is_causal_mask", _CAUSAL_ENCODER),
    ("transformers.trainer.Trainer._finalize_training", Mechanism(
        key="lib:hf_trainer_final", kind="hf_trainer_final", what="The Trainer's end of training",
        advice="Once at the end of training (the final loss): nothing to change.")),
    (_PL + "progress_bar_metrics", _PL_PROGRESS_BAR),
    ("lightning.pytorch.callbacks.progress.", _PL_PROGRESS_BAR),
    (_PL + "on_batch_end", _PL_PROG_BAR_METRICS),
    (_PL + "log_metrics", _PL_LOGGER),
    (_PL + "update_train_step_metrics", _PL_LOGGER),
    ("lightning.pytorch.utilities.data.has_len_all_ranks", Mechanism(
        key="lib:pl_data_check", kind="pl_data_check", what="Lightning's check of the data's length",
        advice=("Once when fit() starts: Lightning checks that every rank's dataloader has batches "
                "(has_len_all_ranks), a few reads of a small tensor: nothing to change."))),
)


def mechanism(site: Site | None) -> Mechanism | None:
    """The known library mechanism a site went through, if any."""
    if site is None:
        return None
    names = list(site.chain)
    for extra in (site.inner, site.via):
        if extra:
            names.append(extra)
    for name in names:
        for prefix, mech in _KNOWN:
            if name.startswith(prefix):
                return _owner(mech, site)
    return None


def _owner(mech: Mechanism, site: Site) -> Mechanism:
    """A mechanism named by the call the user made, where that call owns it."""
    if mech is _CAUSAL_ENCODER and site.via:
        return next((m for prefix, m in _CAUSAL_BY_CALLER if site.via.startswith(prefix)), mech)
    return mech


def mechanisms_through(site: Site | None) -> list[Mechanism]:
    """Every known mechanism a site went through, innermost first (a model's mask check
    inside generate() inside the Trainer's evaluation)."""
    if site is None:
        return []
    out: list[Mechanism] = []
    for name in [*site.chain, *(n for n in (site.inner, site.via) if n)]:
        for prefix, mech in _KNOWN:
            if name.startswith(prefix) and mech not in out:
                out.append(mech)
    return out


DYNAMO_MODULES = ("torch._dynamo", "torch_xla._dynamo")



def is_dynamo(site: Site | None) -> bool:
    """A read made by torch.compile itself (tracing, guards), not by the user's code."""
    return site is not None and bool(site.via) and str(site.via).startswith(DYNAMO_MODULES)


def join_dd(leaders: dict[int, int], step_sites: Sequence[int]) -> None:
    """Add a step's value-dependent op sites (in the order they ran) to ``leaders`` (site ->
    the first site of its group). Ops with a value-dependent shape that run in the same step
    feed one graph (a loss's ``pred[valid]`` and ``target[valid]``): fixing one leaves the
    others' compiles, so they are one finding, named by the group's first site. A site joins
    the group of the step's first site when it has none; a group, once made, stays (the live
    notices name it as the reads come, and calling this again with a longer list of the same
    step changes nothing already joined)."""
    if not step_sites:
        return
    lead = leaders.setdefault(step_sites[0], step_sites[0])
    for s in step_sites[1:]:
        leaders.setdefault(s, lead)


def group_key(site_id: int, site: Site | None, loop_lines: frozenset[tuple[str, int]] = frozenset(),
              lead: Site | None = None) -> str:
    """The finding a site's reads and compiles belong to: torch.compile's own reads, a known
    mechanism, else the library call at that user line, else the site.

    A library call is one finding (``model.generate()``'s stop checks, special tokens and
    logits processors), unless the training loop itself runs inside it (``trainer.train()``:
    its user line is in ``loop_lines``, the lines step barriers were asked for from): then
    each innermost library function is one (the Trainer's logging, its mask checks)."""
    if is_dynamo(site):
        return "dynamo"
    if site is not None and site.access in DATA_DEPENDENT_ACCESSES:
        # Several value-dependent ops on one line (t[mask] feeding unique), or in the same steps
        # (``lead``: the first site of their group, :func:`join_dd`), are one finding.
        anchor = lead if lead is not None else site
        return f"dd:{anchor.file}:{anchor.line}"
    mech = mechanism(site)
    if mech is not None:
        return mech.key
    if site is not None and site.via:
        inside_loop = (site.file, site.line) in loop_lines
        return f"lib:{(site.inner or site.via) if inside_loop else site.via}@{site.file}:{site.line}"
    return f"sync:{site_id}"


def call_key(site: Site | None) -> tuple[str, str, int] | None:
    """The library call a site went through, as one call: (``via``, user file, user line);
    None for the user's own read."""
    return (site.via, site.file, site.line) if site is not None and site.via else None


def finding_id(key: FindingKey, sites: dict[int, Site], loops: frozenset[tuple[str, int]] = frozenset(),
               leaders: Mapping[int, int] | None = None) -> str:
    """The id of the finding a cause's key joins: a host-read site's by :func:`group_key`, any
    other key's own text. The analysis groups by it; the live notices say each id once.
    ``leaders``: the value-dependent ops' groups (:func:`join_dd`)."""
    site = key.site
    if site is None:
        return str(key)
    lead = leaders.get(site) if leaders else None
    return group_key(site, sites.get(site), loops, sites.get(lead) if lead is not None else None)


def same_line_sites(sites: Mapping[int, Site]) -> dict[int, int]:
    """Each user read inside a user function called from several lines (a site with a
    ``caller``) -> the first site reading the same way at the same line: one finding for the
    line, whichever call reached it (an eval function called for two splits)."""
    first: dict[tuple[str, int, str], int] = {}
    out: dict[int, int] = {}
    for sid in sorted(sites):
        s = sites[sid]
        if s.via or s.caller is None or s.access in DATA_DEPENDENT_ACCESSES:
            continue
        out[sid] = first.setdefault((s.file, s.line, s.access), sid)
    return out


def own_barrier(site: Site | None) -> bool:
    """A barrier a library call asked for itself (``xm.mesh_reduce``'s rendezvous syncs,
    ``broadcast_master_param``): not one of the loop's step APIs, nor a known mechanism's."""
    return (site is not None and site.access == "barrier" and is_own_barrier_call(site.via, site.chain)
            and mechanism(site) is None)


def loop_lines(sites: dict[int, Site], train_sites: frozenset[int] = frozenset()) -> frozenset[tuple[str, int]]:
    """The user lines step barriers were asked for from (their sites): a library call at one
    of them runs the training loop. A library's own sync (:func:`own_barrier`) counts only
    when it ended a training step (``train_sites``: ``trainer.train()``'s barriers)."""
    return frozenset((s.file, s.line) for sid, s in sites.items()
                     if s.access == "barrier" and (sid in train_sites or not own_barrier(s)))


def known(key: str) -> Mechanism | None:
    for _, mech in (*_KNOWN, *_CAUSAL_BY_CALLER):
        if mech.key == key:
            return mech
    return None
