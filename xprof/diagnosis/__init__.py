"""The diagnosis engine: what caused each compile, decided once for the analysis and the live notices.

Pure Python (no pandas): the recorder imports it inside the training process, the analysis
imports it to judge a finished run. ``terms`` holds the words both sides share (warm-up,
minor, settled), ``keys`` what groups compiles into findings, ``facts`` what one step,
compile and read show, ``rules`` the causes as units, ``registry`` their precedence and
``walk`` the walk over steps that applies them. docs/diagnosis.md is the reference.
"""
