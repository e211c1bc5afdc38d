"""Integrations with training frameworks. Each module imports its framework lazily.

- :mod:`xprof.integrations.huggingface`: ``XprofCallback`` for ``transformers.Trainer``
  (install with ``pip install 'xprof-lazy[hf]'``).
"""
