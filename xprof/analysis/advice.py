"""What to change, per finding kind. Plain text; the renderers format it."""

from __future__ import annotations

ADVICE = {
    "dynamic_padding": (
        "Pad to fixed shapes: tokenize with padding=\"max_length\" (and truncation=True), or "
        "pad_to_multiple_of=N / a few length buckets in your collate function, so only a few "
        "graphs are ever compiled. The what-if table shows what each choice would leave."
    ),
    "dynamic_size": (
        "Pad it to a few fixed sizes along that dim (the largest it takes, or a multiple of N) "
        "and mask what was padded (for a graph: pad the node and edge counts, with padding "
        "edges pointing at a padding node): each fixed size compiles once. The what-if table "
        "shows what each choice would leave."
    ),
    "padded_values": (
        "Pad it to a few fixed sizes along that dim (the largest it takes, or a multiple of N) "
        "and mask what was padded out of the loss: each fixed size compiles once. The what-if "
        "table shows what each choice would leave."
    ),
    "padding_and_batch": (
        "Both the length and the number of rows change from batch to batch (batches filled up "
        "to a token budget): each (rows, length) pair is a graph, so padding the length alone "
        "is not enough. Pick a few length buckets and a fixed number of rows for each (pad a "
        "short batch with dummy rows masked out of the loss), so only a few shapes are ever "
        "compiled. The what-if table counts what padding the length alone would leave."
    ),
    "micro_batches": (
        "A step that accumulates gradients over another number of micro-batches is another "
        "graph: the last accumulation window of an epoch is short when the batches per epoch "
        "are not a multiple of the accumulation steps (gradient_accumulation_steps), and a count "
        "that follows the data (a token budget) varies at will. Make the count fixed (batches per "
        "epoch a multiple of it), or end each micro-batch with torch_xla.sync() after its "
        "backward, so the graphs are a micro-batch's and the update's, the same whatever the "
        "count; else each window length is one graph, cached after its first time."
    ),
    "settled_padding": (
        "A fixed set of lengths (buckets, or data with few lengths): each compiled once, early, "
        "and the steps after compiled nothing, so this is a one-off cost that a longer run "
        "spreads thin. Fewer lengths compile less but pad more each step; keep the set small "
        "and fixed."
    ),
    "staged_shapes": (
        "One size per stage (a curriculum that grows the length, a schedule of image sizes): "
        "each stage compiles its graphs once, then runs cached, a cost that longer stages spread "
        "thin. To pay it once, pad every stage to the largest size and mask the padding."
    ),
    "partial_batch": (
        "Drop the last partial batch (DataLoader(..., drop_last=True)) or pad it to the full "
        "batch size and mask the padding out of the loss (where rows are compared with each "
        "other, in-batch negatives or batch statistics, mask the padded columns too)."
    ),
    "batch_size_change": (
        "Keep the batch size fixed: every batch size is a separate graph. Pad short batches "
        "to the usual size (and mask them), or use drop_last=True."
    ),
    "shape_change": (
        "Keep this input's shape fixed between steps (pad, bucket or resize to a few fixed "
        "shapes): every new shape compiles a new graph."
    ),
    "resize": (
        "Resize or crop to one fixed size before the tensor reaches the device (in the "
        "dataset's transform or the collate function): every new size moved to the device is "
        "a new graph, even one resized there right after. For multi-scale training keep the "
        "set of sizes small and fixed: each is compiled once, the first time it comes."
    ),
    "sharding_change": (
        "Shard every batch the same way: call xs.mark_sharding on each input with the same mesh "
        "and partition spec every step, or let the loader shard every batch: "
        "MpDeviceLoader(loader, device, input_sharding=xs.ShardingSpec(mesh, (\"data\", None))). "
        "Under SPMD each sharding of an input compiles a graph of its own."
    ),
    "item": (
        "Don't read the value on the host mid-step: keep it on the device and log it "
        "through xm.add_step_closure(fn, (tensor,)) (runs after the barrier, no extra "
        "execution; one added after a loop's last barrier waits for the next, so end the loop "
        "with torch_xla.sync()). If the number feeds the step's own math (a clip scale, a "
        "learning-rate factor), compute it on the device instead: torch.clamp(max_norm / "
        "(norm + 1e-6), max=1.0) rather than min(1.0, max_norm / norm.item())."
    ),
    "log": (
        "The logging module formats the tensor (str(t)) on the host when it emits the record: "
        "the value is read mid-step, whether the message is an f-string or lazy %-formatting. "
        "Log it through xm.add_step_closure(lambda t: logger.info(\"loss %s\", t), (loss,)) (runs "
        "after the barrier, no extra execution)."
    ),
    "print": (
        "Printing a device tensor copies it to the host and runs its graph early. Log it "
        "with xm.add_step_closure(lambda t: print(t), (loss,))."
    ),
    "format": (
        "Formatting a device tensor (f-string, logging) reads its value on the host. Move the "
        "logging into xm.add_step_closure."
    ),
    "repr": (
        "repr()/str() of a device tensor reads its value on the host. Log through "
        "xm.add_step_closure."
    ),
    "tensor_condition": (
        "Python control flow on a device tensor (if loss > x:) waits for its value. Keep the "
        "decision on the device (torch.where, masking) or check it in a step closure. A "
        "decision the host must take (early stopping's break) can wait for a barrier: "
        "torch_xla.sync() just before the if runs the pending ops as a graph of their own, "
        "cached after, so the read compiles at most a tiny graph for the comparison."
    ),
    "scalar": (
        "int()/float() of a device tensor reads its value on the host. Keep it as a tensor, "
        "or read it in xm.add_step_closure."
    ),
    "tolist": (
        ".tolist() copies the tensor to the host and runs its graph early. Do it in "
        "xm.add_step_closure."
    ),
    "numpy": (
        ".numpy() needs the value on the host. Do it after the barrier (xm.add_step_closure)."
    ),
    "to_cpu": (
        "Moving a device tensor to the CPU mid-step runs its graph early. Move it after the "
        "barrier (xm.add_step_closure)."
    ),
    "ready_read": (
        "It ran no graph early (the value was already computed: at the barrier before it, or "
        "by an earlier read), but the host waited for the device to finish that graph, time it "
        "could spend tracing the next step. "
        "Read it in xm.add_step_closure(fn, (tensor,), run_async=True) so the host does not wait. "
        "Those closures run after the barrier on a thread of their own, and nothing waits for "
        "it: the last step's may not have run when the loop ends, so leave run_async off for a "
        "value the code right after the loop needs."
    ),
    "materialize": (
        "Materializing tensors mid-step (xm.unlazy, torch_xla._XLAC._xla_sync_multi) runs their "
        "graph early, apart from the step's. Do it after the barrier, or not at all outside "
        "benchmarks."
    ),
    "library_sync": (
        "A library function called from this line reads a tensor's value on the host."
    ),
    "grad_scaler": (
        "torch.amp.GradScaler(\"xla\").step reads its inf check (found_inf) on the host at every "
        "step, so the device runs early once a step (torch_xla 2.9 has no device-side scaler: "
        "its syncfree optimizers still take that host value). Loss scaling is only needed for "
        "float16: with torch.autocast(\"xla\", dtype=torch.bfloat16), the usual dtype on TPU, "
        "drop the GradScaler and call optimizer.step() directly."
    ),
    "checkpoint": (
        "Saving a checkpoint copies tensors to the host; that is expected when it happens "
        "every few hundred steps. Use xm.save() and save less often if it shows up in step time."
    ),
    "checkpoint_mid_step": (
        "The save ran before the step's barrier, so the tensors it copies were still pending: "
        "reading them ran parts of the step's graph early, each compiled on its own. Save right "
        "after torch_xla.sync() (xm.mark_step()), when they are computed and only the copy is "
        "left; xm.save() there as well."
    ),
    "periodic_graph": (
        "Step-dependent Python control flow switches between graphs. Each variant compiles "
        "once and is cached afterwards; if the number of variants is fixed this is a one-off "
        "cost. To remove it, make the branch a tensor op (torch.where) or run it every step."
    ),
    "eval_pass": (
        "The evaluation pass compiles its own graphs (forward only). That is expected and "
        "cached after the first pass; keep eval batches at one fixed shape (pad the last one) "
        "so it stays at one graph per shape, and wrap it in torch.no_grad()."
    ),
    "eval_pass_nograd": (
        "The evaluation pass compiles its own graphs (forward only, under no_grad). That is "
        "expected and cached after the first pass; keep eval batches at one fixed shape (pad "
        "the last one, or drop_last=True on the eval loader) so it stays at one graph per shape."
    ),
    "graph_change": (
        "The same inputs produced a different graph: look for Python control flow that depends "
        "on the step or on values, Python scalars that change (0 and 1 are baked into the graph "
        "as constants; a Python int used as a slice bound, an index or a size is baked in at any "
        "value), or a different set of live tensors at the barrier."
    ),
    "condition_graph": (
        "A Python `if` on a tensor's value picks which ops the step runs: each outcome is its own "
        "graph (compiled once, cached after), and the host waits for the value every step. Keep "
        "the decision on the device: compute both outcomes and choose with torch.where (or scale "
        "by a mask), so every step is one graph and nothing waits."
    ),
    "baked_scalar": (
        "A value the step's graph took as an input is a constant in this graph, or shares an "
        "input with an equal value: a Python number that became 0 or 1 (a learning rate reaching "
        "0, or so small that 1 - lr * weight_decay rounds to 1.0 in float32: lr * weight_decay "
        "under about 3e-8), a tensor kept across steps and created again on the device (running "
        "= torch.zeros((), device=dev) as an epoch starts), a 0-dim tensor of 0 or 1 moved from "
        "the host, or two Python numbers that became equal (a momentum of 0.9 meeting a dropout "
        "keep probability of 0.9, a KL weight ramping through 0.5). Each such graph compiles "
        "once and is cached, so it costs a few compiles, once. To avoid it: keep the final "
        "learning rate up (1e-5 or more with weight_decay 0.01: eta_min, cosine_with_min_lr, "
        "OneCycleLR's final_div_factor); reset a kept tensor with the step's own ops "
        "(running.mul_(keep[0]), keep = torch.tensor([0.0]).to(dev) that step and [1.0] the "
        "others); pass a changing scalar as a 1-element tensor. XLA_NO_SPECIAL_SCALARS=1 did "
        "not prevent it where tried."
    ),
    "eval_mode_training": (
        "model.eval() (an evaluation, a checkpoint's validation) was not undone: call "
        "model.train() before training again. In eval mode dropout is off and batch-norm "
        "statistics stop updating, so the model trains differently, and the step compiles a "
        "graph of its own."
    ),
    "graph_every_step": (
        "These steps built graphs never seen before from inputs of the same shapes, so "
        "something that changes from step to step is baked into the graph: most often a Python number "
        "used as a size, a slice bound or an offset (a random crop drawn with Python's random), "
        "or a Python scalar that becomes 0 or 1 (those two are baked in as constants; other "
        "values are passed as data). Draw such values as device tensors "
        "(torch.randint on the device and index with them, torch.where for the choice), or keep "
        "sizes and offsets to a few fixed values."
    ),
    "cpu_fallback": (
        "These ops have no XLA lowering and run on the CPU, which cuts the graph and copies "
        "data to the host. Replace them with ops XLA supports, or move them out of the step."
    ),
    "data_dependent": (
        "Keep shapes static: an op whose output size depends on the values (boolean-mask "
        "indexing t[mask], nonzero, masked_select, unique) runs on the CPU and gives a new shape "
        "whenever the count changes. Compute over every row and let the mask weigh them instead: "
        "multiply by the mask (a loss over real tokens: the per-token loss times the mask over "
        "mask.sum(), or cross_entropy(..., ignore_index=-100) with labels set by "
        "torch.where(mask, labels, -100); experts in a mixture: run each on every token and "
        "weigh by its routing mask, or give it a fixed capacity of tokens)."
    ),
    "mask_assign": (
        "t[mask] = v with a boolean mask finds the positions with nonzero() on the CPU: the "
        "pending graph runs first, and the graph after it changes whenever the count does. "
        "Write it without a shape that depends on the values: t = torch.where(mask, v, t), or "
        "t.masked_fill_(mask, v) for a scalar v; both keep every shape static."
    ),
    "value_shape": (
        "Keep shapes static: slice to the fixed padded length and mask the padding instead of "
        "trimming to a length read from the device, or round that length up to a few sizes "
        "(a multiple of 8 or 16) so only a few graphs are ever compiled."
    ),
    "growing_read": (
        "Each read of it in a step runs a longer graph: everything since the last barrier that "
        "is still pending (earlier reads' forward passes, random numbers, kept log-probs) "
        "piles up, and each new length compiles. Put torch_xla.sync() right after the read, "
        "so each read runs the same small graph, cached after the first; or run that part "
        "(acting in an environment, a sampling loop) on the CPU."
    ),
    "deferred_read": (
        "Nothing to fix: a read inside xm.add_step_closure runs after the barrier. Its first "
        "call compiles the small graph it reads (e.g. torch.isnan(loss)); later calls reuse it."
    ),
    "dynamo_recompile": (
        "torch.compile traces a new graph whenever one of its guards fails (often a new input "
        "size: torch.compile(..., dynamic=False) still guards on sizes). Keep input shapes fixed "
        "(drop_last=True, pad to a fixed length). Marking the dim dynamic "
        "(torch._dynamo.mark_dynamic) does not help on XLA: dynamo stops retracing, but "
        "torch_xla's bridge still compiles one XLA graph per concrete size."
    ),
    "dynamo_padding": (
        "torch.compile guards on tensor sizes: each new size of {name} along dim {dim} traces "
        "and compiles new graphs. Pad {name} to a fixed length (tokenize with "
        "padding=\"max_length\", or pad_to_multiple_of=N / a few length buckets in the collate "
        "function). torch._dynamo.mark_dynamic does not help on XLA: torch_xla's bridge "
        "still compiles one XLA graph per concrete size."
    ),
    "dynamo_batch": (
        "torch.compile guards on tensor sizes: each new batch size of {name} traces and "
        "compiles new graphs. Keep the batch size fixed (drop_last=True, or pad the last "
        "batch and mask it). torch._dynamo.mark_dynamic does not help on XLA: torch_xla's "
        "bridge still compiles one XLA graph per concrete size."
    ),
    "dynamo_limit": (
        "It already hit dynamo's recompile limit, so that code now runs without torch.compile: "
        "raising torch._dynamo.config.recompile_limit only postpones this, as every new shape "
        "still compiles; fixing what makes it retrace ends both."
    ),
    "dynamo_global_state": (
        "torch.compile guards on global state such as grad mode: calling the compiled model "
        "under torch.no_grad() (an eval pass) traces it once more for that mode, then both "
        "graphs are cached. A one-off cost; to avoid it, compile a separate function for "
        "evaluation (its own torch.compile) or evaluate less often."
    ),
    "dynamo_guard": (
        "torch.compile traces a new graph whenever one of its guards fails: the failed guard "
        "is quoted in the evidence. Keep what it guards on (dtypes, attributes and Python "
        "values read in the compiled code) the same from call to call, or accept the fixed "
        "number of extra graphs."
    ),
    "dynamo_value": (
        "torch.compile specialized on the Python number {name}: each new value fails its guard "
        "and traces the function again (up to torch._dynamo.config.recompile_limit, 8 by "
        "default; after that the function runs without torch.compile). Pass it as a tensor "
        "(torch.tensor(value, device=...)), or keep it out of the compiled function."
    ),
    "no_barrier": (
        "End every training step with torch_xla.sync() (xm.mark_step()), or iterate a "
        "torch_xla MpDeviceLoader, which syncs at each batch. Without a barrier the pending "
        "graph grows with every step until a value is read, and each read compiles and runs "
        "that whole history again."
    ),
    "reads_only": (
        "Without a step barrier each read runs, and compiles, the graph pending since the read "
        "before; when that graph is new each time (a generated sequence and its cache growing a "
        "token a read), every read compiles. Keep the shapes fixed so the graphs repeat and come "
        "from the cache: a cache preallocated at the longest length (transformers: "
        "generate(..., cache_implementation=\"static\")) and prompts padded to a few lengths; in a "
        "loop of your own, end each iteration with torch_xla.sync()."
    ),
    "never_ran": (
        "Their updates are not in the model: lazy ops run only at a barrier or a read. End the "
        "loop with torch_xla.sync() after the last optimizer step (and end every step with one, "
        "unless the loop syncs every N steps on purpose: then sync once more after the loop)."
    ),
    "eager_mode": (
        "Compile the training step: put forward, loss, backward and optimizer step in one "
        "function and call it through torch_xla.compile (step = torch_xla.compile(step_fn)), "
        "which runs it as one graph; eager mode can stay on for the code around it (data "
        "preparation, logging). Or turn eager mode off (torch_xla.experimental.eager_mode(False)) "
        "so the step is traced lazily up to its barrier."
    ),
    "graph_grows": (
        "Something kept from step to step grows inside the graph: most often a Python list of "
        "device tensors appended to every step (losses.append(loss)) and stacked when read "
        "(torch.stack(losses).mean()), which puts every kept tensor in the graph again. Clear "
        "the list after reading it, or keep a running sum on the device (total += "
        "loss.detach()) and read that. Layers unfrozen in stages grow the graph too; each "
        "stage then compiles once."
    ),
    "input_kinds": (
        "Steps of different kinds (tasks with their own heads and targets, taking turns) are "
        "different graphs, each compiled once and cached: expected in multi-task training, a "
        "few compiles in all, each kind's first steps doing what warm-up does for one. Padding "
        "does not merge them: the ops differ. For one graph, run every head every step and "
        "weight each task's loss by a 1-element tensor (0.0 or 1.0), with targets of one shape "
        "and dtype (note that with Adam a head whose loss is weighted 0 still moves with its "
        "momentum)."
    ),
    "eager_op": (
        "In eager mode each op outside the compiled step compiles once per input shape, the first "
        "time it runs (a loss average for logging, a metric): expected, and cached after. If such "
        "ops run every step, move them into the compiled step function."
    ),
    "own_barrier": (
        "The library call syncs by itself (a collective's rendezvous, a metrics gather) and runs "
        "the ops pending at that point as a graph of its own: compiled once per shape, cached "
        "after. Call it where little is pending (after the pass's own barrier), and not every "
        "step if it is only for logging."
    ),
    "pass_joined": (
        "An evaluation (or any other pass) with no barrier of its own leaves its ops pending, and "
        "the next training step's barrier runs them with the step's: one more graph, and the "
        "pass's results only then. End that pass with torch_xla.sync() (xm.mark_step()), so it "
        "runs as a graph of its own and the training step's graph stays as it was."
    ),
    "step_cut_by_pass": (
        "The training step had no barrier of its own when the evaluation began (model.eval(), "
        "torch.no_grad()), so the pass's first barrier (its loader's first batch, or its first "
        "sync) ran the step's pending ops together with what the pass made before it (a "
        "`correct = torch.zeros(...)` accumulator): another graph, compiled for each shape the "
        "step takes there. End the training step with torch_xla.sync() (xm.mark_step()) before "
        "the evaluation begins, so the step runs the graph it runs everywhere else."
    ),
    "input_set": (
        "A step that moves another set of tensors to the device runs another graph. Move the "
        "same inputs every step (one of the same shape where it is not needed), or make the "
        "choice on the device (torch.where, a mask) so every step is one graph."
    ),
    "bucketed": (
        "Every length is already a multiple of one step: the batches are padded to buckets, and "
        "each bucket compiles its own graph once, cached after. That is the price of bucketing, "
        "paid once per bucket; fewer, wider buckets (a larger multiple, or one length for all: "
        "padding='max_length') compile fewer graphs and pad more."
    ),
    "partial_batch_inference": (
        "Pad the last batch to the full batch size and drop the padded rows' outputs: one graph "
        "for every batch, and no sample left out."
    ),
    "state_grows": (
        "Each step ran on tensors kept on the device, with nothing new from the host, and still "
        "built a graph never seen before. If a tensor carried from step to step grows (a KV cache "
        "or the generated tokens extended with torch.cat, outputs stacked), preallocate it at its "
        "largest size and write each step in place at a position kept as a device tensor "
        "(index_copy_, or a slice assignment), with a mask for the part not written yet. If a "
        "Python number changes (a position, a length, a momentum), keep it fixed or pass it as a "
        "device tensor."
    ),
    "state_inputs": (
        "Each step ran on tensors kept on the device, with nothing new from the host, but the "
        "graph took other tensors or ran other ops: what the step trains or keeps changed "
        "(parameters frozen or unfrozen, gradients kept in some steps and cleared in others, a "
        "module switched to eval). A change made once (unfreezing a layer, a new phase) costs a "
        "graph once; one that comes and goes, keep the same every step (zero_grad every step)."
    ),
    "unknown_debugged": (
        "xprof could not tell why this compiled from what it recorded; torch_xla's own reason "
        "and frames (captured by `xprof run`) are in the evidence. Look at that line for a "
        "tensor read or a shape that changes."
    ),
    "unknown": (
        "xprof could not tell why this compiled. Run under `xprof run` (torch_xla's own "
        "compile analysis is captured) or record inputs by passing batches through a "
        "DataLoader or .to(device)."
    ),
}


READ_KINDS = frozenset({"item", "print", "format", "repr", "tensor_condition", "scalar", "tolist", "numpy",
                        "to_cpu", "log"})
"""Plain reads of a tensor's value (what the user's own line does): their advice ends with
what the run says about how often they read (see :func:`read_tail`)."""


def read_tail(pattern: str | None) -> str:
    """The end of a plain read's advice: read less often, unless it already does."""
    if pattern and pattern != "every step":
        return f" It already reads {pattern}."
    return " Or read it only every N steps."
